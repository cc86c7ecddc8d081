/**
 * Erasing a recipient: a form that names them (user id or address) and says
 * what will go and what stays, behind an explicit confirmation, and the
 * answer's counts per table. It calls `POST /v1/erasures` as the signed-in
 * operator, so a viewer is refused there as everywhere, and the erasure is in
 * the audit trail under their name.
 */
import { Hono } from 'hono'
import type { ConsoleEnv } from '../context.ts'
import { Csrf, ErrorNote, Layout, Table } from '../layout.tsx'
import { needsAdmin, needsViewer } from '../page-roles.ts'

export const erasurePages = new Hono<ConsoleEnv>()

type Erasure = { target: string; erased: Record<string, number> }

const WHAT = [
  ['contacts', 'the contact (address, name, locale, time zone)'],
  ['preferences', 'their choices per kind'],
  ['reviewers', 'their place in the reviewer pool'],
  ['notifications', 'address, name, subject and bodies of their notifications (ids, status and times stay)'],
  ['sentMessages', 'the exact messages sent to them'],
  ['deliveryEvents', 'the detail of the provider events about those messages'],
  ['deadLetters', 'the original message of dead letters that name them (an open one is discarded)'],
  ['suppressions', 'a suppression, kept under the pseudonym only: the address stays suppressed'],
  ['auditTargets', 'audit rows whose target was the address: they name the pseudonym'],
] as const

erasurePages.get('/', needsViewer, (c) => {
  const admin = c.get('operator').role === 'admin'
  const given = c.req.query('userId') ?? ''
  return c.html(
    <Layout page={c.get('page')} title="Erase a recipient">
      <p>
        An erasure request (the right to erasure): everything notify-edge keeps about one recipient goes, in one step
        that cannot be undone, and the audit trail records who did it — without the address.
      </p>
      <ul>
        {WHAT.map(([, what]) => (
          <li>{what}</li>
        ))}
      </ul>
      {admin ? (
        <form method="post" action="/console/erasures">
          <Csrf page={c.get('page')} />
          <label>
            User id or address
            <input name="who" required maxlength={320} value={given} autocomplete="off" />
          </label>
          <label>
            <input type="checkbox" name="confirm" value="yes" required /> I understand this cannot be undone
          </label>
          <div class="actions">
            <button type="submit" class="danger">
              Erase
            </button>
            <a class="button secondary" href="/console/contacts">
              Cancel
            </a>
          </div>
        </form>
      ) : (
        <p class="note">Only an admin may erase a recipient.</p>
      )}
    </Layout>,
  )
})

erasurePages.post('/', needsAdmin, async (c) => {
  const form = (await c.req.parseBody()) as Record<string, string>
  const who = (form.who ?? '').trim()
  if (form.confirm !== 'yes') {
    return c.html(
      <Layout page={c.get('page')} title="Not done">
        <p class="error" role="alert">
          Nothing was erased: tick the confirmation.
        </p>
        <p>
          <a href="/console/erasures">Back</a>
        </p>
      </Layout>,
      400,
    )
  }
  const answer = await c.get('api')<Erasure>(
    'POST',
    '/v1/erasures',
    who.includes('@') ? { address: who } : { userId: who },
  )
  if (answer.status !== 200) {
    return c.html(
      <Layout page={c.get('page')} title="Not done">
        <ErrorNote error={answer.body.error} />
        <p>
          <a href="/console/erasures">Back</a>
        </p>
      </Layout>,
      answer.status >= 500 ? 503 : answer.status === 403 ? 403 : 400,
    )
  }
  const { target, erased } = answer.body
  return c.html(
    <Layout page={c.get('page')} title="Erased">
      <p id="erasure-target">
        The audit trail names this recipient <code>{target}</code>.
      </p>
      <Table
        label="Rows erased per table"
        head={['What', 'Rows']}
        numeric={[1]}
        rows={WHAT.map(([name, what]) => [what, erased[name] ?? 0])}
      />
    </Layout>,
  )
})
