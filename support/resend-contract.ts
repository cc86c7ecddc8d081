/**
 * Resend's published contract for the requests the `resend` transport makes,
 * checked against its own OpenAPI document (vendored unchanged in
 * test/fixtures/resend-openapi/, MIT): the JSON body against the operation's
 * request schema, its header parameters (`Idempotency-Key` at most 256
 * characters), and what the API reference requires of every request and the
 * document cannot say (https://resend.com/docs/api-reference/introduction):
 * a bearer key and a `User-Agent`; of a batch, at most 100 emails and
 * neither attachments nor a scheduled time. Used by the test and chaos stand-ins for
 * Resend, which refuse what this refuses, and by the contract tests; runs in
 * Node and in workerd (@cfworker/json-schema generates no code).
 */
import type { Schema } from '@cfworker/json-schema'
import { schemaValidator } from './openapi-check.ts'

type Parameter = { in: string; name: string; required?: boolean; schema?: Schema }
type Operation = {
  parameters?: Parameter[]
  requestBody?: { content?: Record<string, { schema?: Schema }> }
}

/** The parts of Resend's document the check reads. */
export type ResendDocument = {
  paths: Record<string, Record<string, Operation>>
  components?: { schemas?: Record<string, Schema> }
}

/** One request to check: its method, path (from the API's root), lower-cased headers and raw body. */
export type ResendRequest = { method: string; path: string; headers: Record<string, string | undefined>; body: string }

/** A checker for one document: `check(request)` lists what Resend's contract refuses (empty when nothing). */
export function resendContract(doc: ResendDocument) {
  const validate = schemaValidator(doc.components)
  return {
    check(request: ResendRequest): string[] {
      const operation = doc.paths[request.path]?.[request.method.toLowerCase()]
      if (!operation) return [`${request.method} ${request.path} is not in Resend's API`]
      const problems: string[] = []
      if (!request.headers['user-agent']) problems.push('no User-Agent (Resend answers 403, error 1010)')
      if (!/^Bearer \S+$/.test(request.headers.authorization ?? '')) problems.push('no bearer API key')
      for (const parameter of operation.parameters ?? []) {
        if (parameter.in !== 'header') continue
        const value = request.headers[parameter.name.toLowerCase()]
        if (value === undefined) {
          if (parameter.required) problems.push(`header ${parameter.name} is required`)
        } else if (parameter.schema && !validate(parameter.schema, value).valid) {
          problems.push(`header ${parameter.name} breaks its schema`)
        }
      }
      const schema = operation.requestBody?.content?.['application/json']?.schema
      if (schema) {
        if (!(request.headers['content-type'] ?? '').startsWith('application/json')) {
          problems.push('the body is not application/json')
        }
        let body: unknown
        try {
          body = JSON.parse(request.body)
        } catch {
          return [...problems, 'the body is not JSON']
        }
        const result = validate(schema, body)
        for (const error of result.errors.slice(0, 5)) problems.push(`body ${error.instanceLocation}: ${error.error}`)
        if (request.path === '/emails/batch') problems.push(...batchProblems(body))
      }
      return problems
    },
  }
}

/**
 * What Resend's reference says of a batch and its document does not
 * (https://resend.com/docs/api-reference/emails/send-batch-emails): "Trigger
 * up to 100 batch emails at once", and "The `attachments` and `scheduled_at`
 * fields are not supported yet". An empty batch sends nothing; it is refused
 * too, as a request about nothing.
 */
function batchProblems(body: unknown): string[] {
  if (!Array.isArray(body)) return []
  const problems: string[] = []
  if (body.length === 0) problems.push('a batch of no emails')
  if (body.length > 100) problems.push(`a batch of ${body.length} emails (at most 100)`)
  body.forEach((email, index) => {
    for (const field of ['attachments', 'scheduled_at']) {
      if (email && typeof email === 'object' && field in email) problems.push(`body /${index}/${field}: not in a batch`)
    }
  })
  return problems
}
