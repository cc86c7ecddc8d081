/**
 * Checks an answer of the Worker against its own OpenAPI document: the route
 * and status must be documented, and a JSON body must match the schema the
 * document gives for them. Runs inside workerd (the vitest suites) and in
 * Node (the route fuzzing against `wrangler dev`): @cfworker/json-schema
 * validates without generating code, which workerd does not allow.
 */
import { type Schema, Validator } from '@cfworker/json-schema'

type Content = Record<string, { schema?: Schema }>
type Operation = { responses: Record<string, { content?: Content }> }

/** The parts of an OpenAPI 3.1 document the check reads. */
export type OpenApiDocument = {
  openapi: string
  paths: Record<string, Record<string, Operation>>
  components?: { schemas?: Record<string, Schema> }
}

/** One answer to check. */
export type Answer = { method: string; path: string; status: number; contentType: string | null; body: string }

type Route = { method: string; template: string; pattern: RegExp; literals: number; operation: Operation }

/**
 * Validates values against schemas of one OpenAPI 3.1 document (JSON Schema
 * 2020-12), each validator built once. References point into the document's
 * components, so each schema is validated against a root that holds them.
 */
export function schemaValidator(components: { schemas?: Record<string, Schema> } | undefined) {
  const validators = new Map<Schema, Validator>()
  return (schema: Schema, value: unknown) => {
    let validator = validators.get(schema)
    if (!validator) {
      validator = new Validator({ ...schema, components } as Schema, '2020-12', false)
      validators.set(schema, validator)
    }
    return validator.validate(value)
  }
}

/** A checker for one document: `check(answer)` lists what does not match (empty when all does). */
export function openApiChecker(doc: OpenApiDocument) {
  const routes: Route[] = Object.entries(doc.paths)
    .flatMap(([template, methods]) =>
      Object.entries(methods).map(([method, operation]) => ({
        method: method.toUpperCase(),
        template,
        pattern: new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+').replaceAll('.', '\\.')}$`),
        literals: template.split('/').filter((segment) => !segment.startsWith('{')).length,
        operation,
      })),
    )
    // A literal segment beats a parameter: /v1/dead-letters/replay before /v1/dead-letters/{id}.
    .sort((a, b) => b.literals - a.literals)
  const validate = schemaValidator(doc.components)
  const errorSchema = doc.components?.schemas?.Error

  return {
    /** The documented operation of a method and concrete path, if any. */
    route(method: string, path: string): Route | undefined {
      return routes.find((route) => route.method === method && route.pattern.test(path))
    },

    check(answer: Answer): string[] {
      const where = `${answer.method} ${answer.path.slice(0, 120)} → ${answer.status}`
      const route = routes.find(
        (candidate) => candidate.method === answer.method && candidate.pattern.test(answer.path),
      )
      let content: Content | undefined
      if (route) {
        const response = route.operation.responses[String(answer.status)]
        if (!response)
          return [`${where}: status ${answer.status} is not documented for ${route.method} ${route.template}`]
        content = response.content
      } else if (errorSchema && answer.status >= 400) {
        // No such route: whatever answers must still be the error body every route documents.
        content = { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } }
      } else {
        return [`${where}: no documented route`]
      }
      if (!content) return []
      const type = answer.contentType?.split(';')[0]?.trim() ?? ''
      const documented = content[type]
      if (!documented) return [`${where}: content type "${type}" is not one of ${Object.keys(content).join(', ')}`]
      if (type !== 'application/json' || !documented.schema) return []
      let value: unknown
      try {
        value = JSON.parse(answer.body)
      } catch {
        return [`${where}: the body is not JSON`]
      }
      const result = validate(documented.schema, value)
      return result.valid
        ? []
        : result.errors.slice(0, 5).map((error) => `${where}: ${error.instanceLocation} ${error.error}`)
    },
  }
}
