/**
 * How large a console request's body may be, checked before anything reads
 * it: by its Content-Length at once, or while it streams (Hono's
 * `bodyLimit`). Without it a 60 MB form posted to the sign-in page, by anyone,
 * was parsed in full, and a signed-in post before its CSRF token was checked.
 */
import type { Context, MiddlewareHandler } from 'hono'
import { bodyLimit } from 'hono/body-limit'
import type { ConsoleEnv } from './context.ts'
import { problemPage } from './problem.tsx'

/** The sign-in form: one token field, and room to spare. */
export const SIGN_IN_MAX_BYTES = 8 * 1024

/**
 * Any other console form. The largest is a template's: three parts of up to
 * TEMPLATE_PARSE_LIMIT (200 000) characters each, form-encoded — a character
 * outside ASCII is up to nine bytes (`%E2%82%BD`) — so about 5.4 MB at worst.
 */
export const FORM_MAX_BYTES = 6 * 1024 * 1024

const tooLarge = (max: number) => (c: Context<ConsoleEnv>) =>
  c.html(
    problemPage(
      c.get('page') ?? { nonce: '' },
      'Too large',
      `This form is larger than the console takes (${max} bytes).`,
    ),
    413,
  )

const signIn = bodyLimit({ maxSize: SIGN_IN_MAX_BYTES, onError: tooLarge(SIGN_IN_MAX_BYTES) })
const form = bodyLimit({ maxSize: FORM_MAX_BYTES, onError: tooLarge(FORM_MAX_BYTES) })

/** The console's limit for this request's body: the sign-in form's, or any other form's. */
export const consoleBodyLimit: MiddlewareHandler<ConsoleEnv> = (c, next) =>
  c.req.method === 'GET' || c.req.method === 'HEAD'
    ? next()
    : c.req.path === '/console/sign-in'
      ? signIn(c, next)
      : form(c, next)
