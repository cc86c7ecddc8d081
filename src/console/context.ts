import type { Context } from 'hono'
import type { Operator } from '../audit/operator.ts'
import type { ConsoleApi } from './api.ts'
import type { PageContext } from './layout.tsx'
import type { Session } from './session.ts'

/** What the console's handlers find on their context once signed in. */
export type ConsoleEnv = {
  Bindings: Env
  Variables: { session: Session; operator: Operator; page: PageContext; api: ConsoleApi; secureHeadersNonce?: string }
}

/** A console handler's context. */
export type ConsoleContext = Context<ConsoleEnv>
