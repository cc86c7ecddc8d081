/**
 * fast-check arbitraries derived from the JSON Schemas of the Worker's OpenAPI
 * document (the zod schemas of its routes, as the document publishes them),
 * and the hostile values a careless or malicious client sends instead.
 */
import fc from 'fast-check'

/** A JSON Schema as the document holds it (the subset its routes use). */
export type JsonSchema = {
  $ref?: string
  type?: string | string[]
  enum?: unknown[]
  const?: unknown
  format?: string
  minLength?: number
  maxLength?: number
  minimum?: number
  maximum?: number
  exclusiveMinimum?: number
  items?: JsonSchema
  properties?: Record<string, JsonSchema>
  required?: string[]
  anyOf?: JsonSchema[]
  oneOf?: JsonSchema[]
  allOf?: JsonSchema[]
}

/** Strings a hostile client puts anywhere a value goes. */
export const HOSTILE_STRINGS = [
  '',
  ' ',
  '\u0000',
  'a\u0000b',
  '%00',
  '../../etc/passwd',
  '-1',
  '0',
  '-999999999999',
  '99999999999999999999999',
  '1e309',
  'NaN',
  'Infinity',
  'null',
  'true',
  '[]',
  '{}',
  '\ud800',
  '🙂'.repeat(300),
  "' OR 1=1 --",
  '<script>alert(1)</script>',
  '{{ 7 * 7 }}{% for i in (1..9) %}x{% endfor %}',
  'eyJub3QiOiJhIGN1cnNvciJ9',
  'Zm9vYmFy====',
  '2026-13-45T99:99:99Z',
  'x'.repeat(1_000_000),
] as const

/** A hostile value of any JSON type. */
export const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(...HOSTILE_STRINGS),
  fc.constantFrom(-1, 0, -(2 ** 53), 2 ** 53 + 1, 1e308, -1e308, 0.5, null, true, false, [], {}),
  fc.string({ unit: 'binary', maxLength: 30 }),
  fc.jsonValue({ maxDepth: 3 }),
)

type Document = { components?: { schemas?: Record<string, JsonSchema> } }

function resolve(schema: JsonSchema, doc: Document): JsonSchema {
  if (!schema.$ref) return schema
  const name = schema.$ref.replace('#/components/schemas/', '')
  return doc.components?.schemas?.[name] ?? {}
}

/** Values that match `schema` (within small sizes), each now and then replaced by a hostile one. */
export function arbitraryOf(input: JsonSchema, doc: Document, depth = 0): fc.Arbitrary<unknown> {
  const schema = resolve(input, doc)
  const valid = validOf(schema, doc, depth)
  return fc.oneof({ arbitrary: valid, weight: 4 }, { arbitrary: hostileValue, weight: 1 })
}

function validOf(schema: JsonSchema, doc: Document, depth: number): fc.Arbitrary<unknown> {
  if (schema.const !== undefined) return fc.constant(schema.const)
  if (schema.enum) return fc.constantFrom(...schema.enum)
  const choices = schema.anyOf ?? schema.oneOf
  if (choices) return fc.oneof(...choices.map((choice) => arbitraryOf(choice, doc, depth + 1)))
  if (schema.allOf?.[0]) return arbitraryOf(schema.allOf[0], doc, depth + 1)
  const types = Array.isArray(schema.type) ? schema.type : schema.type ? [schema.type] : []
  if (types.length > 1) return fc.oneof(...types.map((type) => validOf({ ...schema, type }, doc, depth)))
  switch (types[0]) {
    case 'null':
      return fc.constant(null)
    case 'boolean':
      return fc.boolean()
    case 'integer':
      return fc.integer({ min: schema.minimum ?? -1000, max: schema.maximum ?? 1000 })
    case 'number':
      return fc.double({ min: schema.minimum ?? -1000, max: schema.maximum ?? 1000, noNaN: true })
    case 'string':
      return stringOf(schema)
    case 'array':
      return depth > 4 ? fc.constant([]) : fc.array(arbitraryOf(schema.items ?? {}, doc, depth + 1), { maxLength: 3 })
    case 'object': {
      if (depth > 4 || !schema.properties) return fc.constant({})
      const properties = Object.fromEntries(
        Object.entries(schema.properties).map(([key, value]) => [key, arbitraryOf(value, doc, depth + 1)]),
      )
      return fc.record(properties, { requiredKeys: (schema.required ?? []).filter((key) => key in properties) })
    }
    default:
      return fc.jsonValue({ maxDepth: 2 })
  }
}

function stringOf(schema: JsonSchema): fc.Arbitrary<string> {
  if (schema.format === 'date-time') {
    return fc
      .date({ min: new Date('2000-01-01'), max: new Date('2100-01-01'), noInvalidDate: true })
      .map((date) => date.toISOString())
  }
  if (schema.format === 'email') return fc.emailAddress()
  if (schema.format === 'uuid') return fc.uuid()
  const minLength = schema.minLength ?? 0
  return fc.string({ minLength, maxLength: Math.max(minLength, Math.min(schema.maxLength ?? 40, 40)) })
}
