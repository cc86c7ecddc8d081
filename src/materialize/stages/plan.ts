import { PipelineError } from '../../errors.ts'
import { type BatchRun, describe, type Entry, identityOf, type Work } from '../batch.ts'
import { type BatchContext, type ContextQuery, loadContext } from '../context.ts'
import { planEvent } from '../plan-event.ts'

/**
 * Stage 3: read what planning needs (one D1 round trip for the whole batch),
 * then plan each event on its own: a planning error fails that event only.
 */
export async function planStage(run: BatchRun): Promise<void> {
  const fresh = run.open().filter((entry) => entry.work)
  if (fresh.length === 0) return
  let context: BatchContext
  try {
    context = await loadContext(run.db, contextQuery(fresh.map((entry) => entry.work as Work)))
  } catch (cause) {
    const error = new PipelineError('NTF_DEPENDENCY_FAILED', `D1 read: ${(cause as Error).message}`, { cause })
    for (const entry of fresh) run.fail(entry, error, fieldsOf(entry))
    return
  }
  for (const entry of fresh) {
    const work = entry.work as Work
    try {
      const plan = await planEvent(work, context, run.config, run.now)
      if (plan.type === 'fail') {
        run.fail(entry, plan.error, fieldsOf(entry), work.intent.type === 'notify' ? work.intent.kind : undefined)
      } else entry.plan = plan
    } catch (error) {
      run.fail(entry, error, fieldsOf(entry))
    }
  }
}

function fieldsOf(entry: Entry) {
  return entry.inbound && entry.work ? { ...describe(entry.inbound), ...identityOf(entry.work.event) } : {}
}

function contextQuery(works: readonly Work[]): ContextQuery {
  const userIds: string[] = []
  const kinds = new Set<string>()
  const decisionPersons: string[] = []
  let needPool = false
  for (const { intent } of works) {
    if (intent.type !== 'notify') continue
    kinds.add(intent.kind)
    if (intent.recipients === 'reviewer-pool') needPool = true
    else userIds.push(...intent.recipients.map((recipient) => recipient.userId))
    if (intent.decision) decisionPersons.push(intent.decision.person)
  }
  return { keys: works.map((work) => work.event.idempotencyKey), userIds, needPool, kinds: [...kinds], decisionPersons }
}
