/**
 * Templates: every kind and locale, the version in effect and its history, an
 * editor that previews against the kind's example payload before saving (the
 * API's own checks and limits), and a roll back to any older version — which
 * saves it again as the newest, so the history only grows.
 */
import { Hono } from 'hono'
import { raw } from 'hono/html'
import { templateKeys } from '../../events/registry.ts'
import type { ConsoleContext, ConsoleEnv } from '../context.ts'
import { Csrf, ErrorNote, Layout, type PageContext, Table } from '../layout.tsx'
import { needsAdmin, needsViewer } from '../page-roles.ts'
import { Time } from '../time.tsx'

type Parts = { subject: string; textBody: string; htmlBody: string }
type Template = Parts & { kind: string; locale: string; channel: string; version: number; createdAt: string | null }
type Rendered = { subject: string; text: string; html: string }
type Version = { version: number; active: number; subject: string; created_at: string }

const key = (kind: string, locale: string, channel: string) =>
  `/${encodeURIComponent(kind)}/${encodeURIComponent(locale)}/${encodeURIComponent(channel)}`

export const templatePages = new Hono<ConsoleEnv>()

templatePages.get('/', needsViewer, async (c) => {
  const { results } = await c.env.DB.prepare(
    'SELECT kind, locale, channel, max(version) AS version FROM templates GROUP BY kind, locale, channel',
  ).all<{ kind: string; locale: string; channel: string; version: number }>()
  const rows = new Map<string, { kind: string; locale: string; channel: string; version: number }>()
  for (const { key: kind, templates } of templateKeys()) {
    for (const locale of Object.keys(templates)) {
      rows.set(`${kind}|${locale}|email`, { kind, locale, channel: 'email', version: 0 })
    }
  }
  for (const row of results) rows.set(`${row.kind}|${row.locale}|${row.channel}`, row)
  const sorted = [...rows.values()].sort((a, b) => `${a.kind}${a.locale}`.localeCompare(`${b.kind}${b.locale}`))
  return c.html(
    <Layout page={c.get('page')} title="Templates">
      <Table
        label="Templates"
        head={['Kind', 'Locale', 'Channel', 'Latest version']}
        numeric={[3]}
        rows={sorted.map((row) => [
          <a href={`/console/templates${key(row.kind, row.locale, row.channel)}`}>{row.kind}</a>,
          row.locale,
          row.channel,
          row.version === 0 ? 'built-in' : row.version,
        ])}
      />
      <h2>A new locale</h2>
      <form class="filters" method="get" action="/console/templates/new">
        <label>
          Kind
          <select name="kind">
            {templateKeys().map(({ key: kind }) => (
              <option value={kind}>{kind}</option>
            ))}
          </select>
        </label>
        <label>
          Locale
          <input name="locale" required pattern="[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*" />
        </label>
        <button type="submit">Open the editor</button>
      </form>
    </Layout>,
  )
})

templatePages.get('/new', needsViewer, (c) => {
  const kind = c.req.query('kind') ?? ''
  const locale = c.req.query('locale') ?? ''
  return c.redirect(`/console/templates${key(kind, locale, 'email')}`, 303)
})

async function history(db: D1Database, kind: string, locale: string, channel: string) {
  const { results } = await db
    .prepare(
      `SELECT version, active, subject, created_at FROM templates
       WHERE kind = ?1 AND locale = ?2 AND channel = ?3 ORDER BY version DESC LIMIT 100`,
    )
    .bind(kind, locale, channel)
    .all<Version>()
  return results
}

/**
 * One of the console's two bits of script (the other shows times in the
 * browser's zone, time.tsx), and optional: while an operator
 * types, the form is posted to its own preview action and the preview section
 * of the answer replaces this page's. Without it the Preview button does the
 * same with a page load.
 */
const LIVE_PREVIEW = `(() => {
  const form = document.querySelector('form[action$="/preview"]');
  const target = document.getElementById('preview');
  if (!form || !target) return;
  let timer;
  form.addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      const answer = await fetch(form.action, { method: 'POST', body: new URLSearchParams(new FormData(form)) });
      const page = new DOMParser().parseFromString(await answer.text(), 'text/html');
      const fresh = page.getElementById('preview');
      if (fresh) target.replaceChildren(...fresh.childNodes);
      else target.textContent = '';
    }, 400);
  });
})();`

/** Every saved version, newest first, each but the one in effect with its roll back. */
function History(props: { path: string; admin: boolean; versions: Version[]; page: PageContext }) {
  return (
    <>
      <h2>History</h2>
      <Table
        label="Versions"
        head={['Version', 'Saved', 'Subject', '']}
        rows={props.versions.map((version) => [
          version.version,
          <Time at={version.created_at} relative />,
          version.subject,
          version.active ? (
            'in effect'
          ) : props.admin ? (
            <form method="post" action={`${props.path}/restore`}>
              <Csrf page={props.page} />
              <input type="hidden" name="version" value={String(version.version)} />
              <button type="submit" class="secondary">
                Roll back to version {version.version}
              </button>
            </form>
          ) : (
            ''
          ),
        ])}
      />
    </>
  )
}

/** The three parts, with Preview (anyone) and Save (an admin) as its two buttons. */
function PartsForm(props: { path: string; admin: boolean; parts: Parts; page: PageContext }) {
  return (
    <form method="post" action={`${props.path}/preview`}>
      <Csrf page={props.page} />
      <label>
        Subject
        <input name="subject" value={props.parts.subject} required />
      </label>
      <label>
        Text part (Liquid)
        <textarea name="textBody" required>
          {props.parts.textBody}
        </textarea>
      </label>
      <label>
        HTML part (Liquid)
        <textarea name="htmlBody" required>
          {props.parts.htmlBody}
        </textarea>
      </label>
      <div class="actions">
        <button type="submit" class="secondary">
          Preview with the example
        </button>
        {props.admin ? (
          <button type="submit" formaction={`${props.path}/save`}>
            Save as the new version
          </button>
        ) : null}
      </div>
    </form>
  )
}

function Editor(props: {
  c: ConsoleContext
  kind: string
  locale: string
  channel: string
  parts: Parts
  current?: Template
  versions: Version[]
  rendered?: Rendered
  error?: { code: string; message: string; issues?: { field: string; message: string }[] }
  saved?: number
}) {
  const { c, kind, locale, channel, parts } = props
  const path = `/console/templates${key(kind, locale, channel)}`
  const admin = c.get('operator').role === 'admin'
  return (
    <Layout page={c.get('page')} title={`${kind} · ${locale} · ${channel}`}>
      {props.saved ? (
        <p class="ok" role="status">
          Saved as version {props.saved}; it is in effect now.
        </p>
      ) : null}
      <ErrorNote error={props.error} />
      <p>
        In effect:{' '}
        {props.current
          ? props.current.version === 0
            ? 'the built-in default'
            : `version ${props.current.version}`
          : 'nothing yet'}
        .
      </p>
      <PartsForm path={path} admin={admin} parts={parts} page={c.get('page')} />
      <section id="preview" aria-live="polite" aria-label="Preview">
        {props.rendered ? (
          <>
            <h2>Preview</h2>
            <p>
              <strong>Subject:</strong> {props.rendered.subject}
            </p>
            <pre>{props.rendered.text}</pre>
            <pre>{props.rendered.html}</pre>
          </>
        ) : null}
      </section>
      <script nonce={c.get('page').nonce}>{raw(LIVE_PREVIEW)}</script>
      <History path={path} admin={admin} versions={props.versions} page={c.get('page')} />
    </Layout>
  )
}

type EditorProps = Parameters<typeof Editor>[0]

async function editorProps(
  c: EditorProps['c'],
  extra: Partial<EditorProps> = {},
): Promise<EditorProps & { found: boolean }> {
  const { kind, locale, channel } = c.req.param() as { kind: string; locale: string; channel: string }
  const answer = await c.get('api')<Template>('GET', `/v1/templates${key(kind, locale, channel)}`)
  const current = answer.status === 200 ? answer.body : undefined
  const parts = current
    ? { subject: current.subject, textBody: current.textBody, htmlBody: current.htmlBody }
    : { subject: '', textBody: '', htmlBody: '' }
  return {
    c,
    kind,
    locale,
    channel,
    parts,
    current,
    versions: await history(c.env.DB, kind, locale, channel),
    found: answer.status === 200 || answer.status === 404,
    ...extra,
  }
}

const partsOf = (form: Record<string, string>): Parts => ({
  subject: form.subject ?? '',
  textBody: form.textBody ?? '',
  htmlBody: form.htmlBody ?? '',
})

templatePages.get('/:kind/:locale/:channel', needsViewer, async (c) => {
  const props = await editorProps(c)
  if (!props.found) return c.notFound()
  return c.html(<Editor {...props} />)
})

// A POST that changes nothing: a viewer may preview.
templatePages.post('/:kind/:locale/:channel/preview', needsViewer, async (c) => {
  const { kind, locale, channel } = c.req.param()
  const parts = partsOf((await c.req.parseBody()) as Record<string, string>)
  const answer = await c.get('api')<Rendered>('POST', '/v1/templates/preview', { kind, locale, channel, ...parts })
  const props = await editorProps(c, { parts })
  // One render at a time per operator (src/api/render-turns.ts): the refusal says so, with its wait.
  const busy = answer.status === 429
  if (busy) c.header('retry-after', '1')
  return c.html(
    <Editor
      {...props}
      parts={parts}
      rendered={answer.status === 200 ? answer.body : undefined}
      error={answer.body.error}
    />,
    answer.status === 200 ? 200 : busy ? 429 : 400,
  )
})

templatePages.post('/:kind/:locale/:channel/save', needsAdmin, async (c) => {
  const { kind, locale, channel } = c.req.param()
  const parts = partsOf((await c.req.parseBody()) as Record<string, string>)
  const answer = await c.get('api')<Template & { preview: Rendered }>(
    'PUT',
    `/v1/templates${key(kind, locale, channel)}`,
    parts,
  )
  if (answer.status !== 200) {
    const props = await editorProps(c, { parts })
    return c.html(<Editor {...props} parts={parts} error={answer.body.error} />, 400)
  }
  const props = await editorProps(c, { saved: answer.body.version, rendered: answer.body.preview })
  return c.html(<Editor {...props} saved={answer.body.version} rendered={answer.body.preview} />)
})

templatePages.post('/:kind/:locale/:channel/restore', needsAdmin, async (c) => {
  const { kind, locale, channel } = c.req.param()
  const form = (await c.req.parseBody()) as Record<string, string>
  const old = await c.env.DB.prepare(
    `SELECT subject, text_body, html_body FROM templates WHERE kind = ?1 AND locale = ?2 AND channel = ?3 AND version = ?4`,
  )
    .bind(kind, locale, channel, Number(form.version))
    .first<{ subject: string; text_body: string; html_body: string }>()
  if (!old) return c.notFound()
  const parts = { subject: old.subject, textBody: old.text_body, htmlBody: old.html_body }
  const answer = await c.get('api')<Template>('PUT', `/v1/templates${key(kind, locale, channel)}`, parts)
  const props = await editorProps(c)
  if (answer.status !== 200) return c.html(<Editor {...props} parts={parts} error={answer.body.error} />, 400)
  return c.html(<Editor {...props} saved={answer.body.version} />)
})
