import type { Bundle, Marked, ToSend } from '../run.ts'
import { markBundle } from './mark-bundle.ts'
import { markOne } from './mark-one.ts'
import type { SendContext, Tried } from './send.ts'

/**
 * The mark stage: records how a try ended — for one notification
 * (src/dispatch/stages/mark-one.ts) or a bundle, member by member
 * (src/dispatch/stages/mark-bundle.ts) — under the batch's lease token, and
 * says how each message ends and when its notification is tried next. A mark
 * that finds the claim taken over changes nothing.
 */
export function markStage(context: SendContext, work: ToSend | Bundle, tried: Tried): Promise<Marked[]> {
  return 'members' in work ? markBundle(context, work, tried) : markOne(context, work, tried)
}
