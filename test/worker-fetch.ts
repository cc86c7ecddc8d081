import { createExecutionContext } from 'cloudflare:test'
import { env, exports } from 'cloudflare:workers'
import worker from '../src/index.ts'
import { type OpenApiDocument, openApiChecker } from '../support/openapi-check.ts'

let checker: Promise<ReturnType<typeof openApiChecker>> | undefined

/**
 * The Worker's own fetch handler, as Cloudflare would call it (with `vars`
 * laid over the test env, for a route that reads its configuration). Every
 * answer is checked against /openapi.json for its route and status; an answer
 * the document does not describe fails the test.
 */
export async function fetchWorker(
  path: string,
  init: RequestInit = {},
  vars: Record<string, string> = {},
): Promise<Response> {
  const request = new Request(`http://worker${path}`, init)
  const response =
    Object.keys(vars).length === 0
      ? await exports.default.fetch(request)
      : await worker.fetch(request, { ...env, ...vars } as Env, createExecutionContext())
  checker ??= exports.default
    .fetch('http://worker/openapi.json')
    .then(async (answer) => openApiChecker((await answer.json()) as OpenApiDocument))
  const problems = (await checker).check({
    method: request.method,
    path: new URL(request.url).pathname,
    status: response.status,
    contentType: response.headers.get('content-type'),
    body: await response.clone().text(),
  })
  if (problems.length > 0) throw new Error(`the answer does not match /openapi.json:\n${problems.join('\n')}`)
  return response
}
