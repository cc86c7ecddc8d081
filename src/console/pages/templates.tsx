/**
 * Templates: every kind and locale, by channel — an email, and an in-app item
 * for a kind that has one — the version in effect and its history, an editor
 * that previews against the kind's example payload before saving (the API's
 * own checks and limits: an email as it is sent, an item as a feed would show
 * it), and a roll back to any older version — which saves it again as the
 * newest, so the history only grows.
 */
import { Hono } from 'hono'
import { raw } from 'hono/html'
import { templateKeys } from '../../events/registry.ts'
import { inAppTemplateOf } from '../../templates/in-app.ts'
import type { ConsoleContext, ConsoleEnv } from '../context.ts'
import { Csrf, ErrorNote, Layout, type PageContext, Table } from '../layout.tsx'
import { needsAdmin, needsViewer } from '../page-roles.ts'
import { Time } from '../time.tsx'

type Parts = { subject: string; textBody: string; htmlBody: string }
/** An in-app template as its form holds it: five fields, an empty one a part the item does not have. */
type ItemParts = { title: string; body: string; link: string; actionLabel: string; actionUrl: string }
type Action = { label: string; url: string }
type Key = { kind: string; locale: string; channel: string; version: number; createdAt: string | null }
type Template = Key & (Parts | { title: string; body: string; link: string | null; action: Action | null })
type Rendered = { subject: string; text: string; html: string }
/** An in-app template's preview: the item as a feed would show it. */
type Item = { title: string; body: string; link: string | null; action: Action | null }
type Version = { version: number; active: number; subject: string; created_at: string }

/** The channels a template is edited for: an in-app item only for a kind that has one. */
const CHANNELS = ['email', 'in-app'] as const

/** Whether `kind` has templates on `channel`: email always; in-app when its event type declares them. */
const hasChannel = (kind: string, channel: string) =>
  channel === 'email' || (channel === 'in-app' && templateKeys().some((entry) => entry.key === kind && entry.inApp))

const key = (kind: string, locale: string, channel: string) =>
  `/${encodeURIComponent(kind)}/${encodeURIComponent(locale)}/${encodeURIComponent(channel)}`

export const templatePages = new Hono<ConsoleEnv>()

templatePages.get('/', needsViewer, async (c) => {
  const { results } = await c.env.DB.prepare(
    'SELECT kind, locale, channel, max(version) AS version FROM templates GROUP BY kind, locale, channel',
  ).all<{ kind: string; locale: string; channel: string; version: number }>()
  const rows = new Map<string, { kind: string; locale: string; channel: string; version: number }>()
  for (const { key: kind, templates, inApp } of templateKeys()) {
    for (const locale of Object.keys(templates)) {
      rows.set(`${kind}|${locale}|email`, { kind, locale, channel: 'email', version: 0 })
    }
    for (const locale of Object.keys(inApp ?? {})) {
      rows.set(`${kind}|${locale}|in-app`, { kind, locale, channel: 'in-app', version: 0 })
    }
  }
  for (const row of results) rows.set(`${row.kind}|${row.locale}|${row.channel}`, row)
  // A kind's locales together, each locale's email before its in-app item.
  const sorted = [...rows.values()].sort((a, b) =>
    `${a.kind}|${a.locale}|${a.channel}`.localeCompare(`${b.kind}|${b.locale}|${b.channel}`),
  )
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
        <label>
          Channel
          <select name="channel">
            {CHANNELS.map((channel) => (
              <option value={channel}>{channel}</option>
            ))}
          </select>
        </label>
        <button type="submit">Open the editor</button>
      </form>
    </Layout>,
  )
})

templatePages.get('/new', needsViewer, (c) => {
  const kind = c.req.query('kind') ?? ''
  const locale = c.req.query('locale') ?? ''
  const channel = c.req.query('channel') === 'in-app' ? 'in-app' : 'email'
  return c.redirect(`/console/templates${key(kind, locale, channel)}`, 303)
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
function History(props: { path: string; channel: string; admin: boolean; versions: Version[]; page: PageContext }) {
  return (
    <>
      <h2>History</h2>
      <Table
        label="Versions"
        head={['Version', 'Saved', props.channel === 'in-app' ? 'Title' : 'Subject', '']}
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

/** An email's three parts. */
function EmailFields(props: { parts: Parts }) {
  return (
    <>
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
    </>
  )
}

/** An in-app item's fields, each Liquid and plain text: a feed escapes nothing and shows no HTML. */
function ItemFields(props: { parts: ItemParts }) {
  return (
    <>
      <p id="item-help">
        Plain text, each field Liquid. The title is cut at 200 characters and the body at 2,000; the link and the
        action's address are http(s) addresses once rendered, or left out; an action needs both its label and its
        address. Leave a field empty for an item without it.
      </p>
      <label>
        Title
        <input name="title" value={props.parts.title} required aria-describedby="item-help" />
      </label>
      <label>
        Body
        <textarea name="body">{props.parts.body}</textarea>
      </label>
      <label>
        Link
        <input name="link" value={props.parts.link} />
      </label>
      <label>
        Action label
        <input name="actionLabel" value={props.parts.actionLabel} />
      </label>
      <label>
        Action address
        <input name="actionUrl" value={props.parts.actionUrl} />
      </label>
    </>
  )
}

/** The channel's fields, with Preview (anyone) and Save (an admin) as its two buttons. */
function PartsForm(props: { path: string; admin: boolean; parts: Parts | ItemParts; page: PageContext }) {
  return (
    <form method="post" action={`${props.path}/preview`}>
      <Csrf page={props.page} />
      {'title' in props.parts ? <ItemFields parts={props.parts} /> : <EmailFields parts={props.parts} />}
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

/** An email as rendered: its subject, text part and HTML source. */
function EmailPreview(props: { rendered: Rendered }) {
  return (
    <>
      <h2>Preview</h2>
      <p>
        <strong>Subject:</strong> {props.rendered.subject}
      </p>
      <pre>{props.rendered.text}</pre>
      <pre>{props.rendered.html}</pre>
    </>
  )
}

/**
 * The item as a feed would show it: what was cut is cut, and a link or an
 * action a feed would not take is said to be left out. Its addresses are
 * shown, not followed: they are the example's.
 */
function ItemPreview(props: { item: Item }) {
  const { item } = props
  return (
    <>
      <h2>Preview</h2>
      <article class="card item" aria-label="The item">
        <p>
          <strong>{item.title}</strong>
        </p>
        {item.body ? <p>{item.body}</p> : null}
        <dl>
          <dt>Link</dt>
          <dd>{item.link ? <code>{item.link}</code> : 'none (empty, or not an http(s) address)'}</dd>
          <dt>Action</dt>
          <dd>
            {item.action ? (
              <>
                {item.action.label}: <code>{item.action.url}</code>
              </>
            ) : (
              'none (it needs a label and an http(s) address)'
            )}
          </dd>
        </dl>
      </article>
    </>
  )
}

function Editor(props: {
  c: ConsoleContext
  kind: string
  locale: string
  channel: string
  parts: Parts | ItemParts
  current?: Template
  versions: Version[]
  rendered?: Rendered | Item
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
        {!props.rendered ? null : 'title' in props.rendered ? (
          <ItemPreview item={props.rendered} />
        ) : (
          <EmailPreview rendered={props.rendered} />
        )}
      </section>
      <script nonce={c.get('page').nonce}>{raw(LIVE_PREVIEW)}</script>
      <History path={path} channel={channel} admin={admin} versions={props.versions} page={c.get('page')} />
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
  return {
    c,
    kind,
    locale,
    channel,
    parts: current ? partsOfTemplate(current) : partsOf(channel, {}),
    current,
    versions: await history(c.env.DB, kind, locale, channel),
    found: answer.status === 200 || (answer.status === 404 && hasChannel(kind, channel)),
    ...extra,
  }
}

/** The form's fields of a template the API answered. */
function partsOfTemplate(template: Template): Parts | ItemParts {
  if ('subject' in template) {
    return { subject: template.subject, textBody: template.textBody, htmlBody: template.htmlBody }
  }
  return itemPartsOf(template)
}

/** An in-app template's form fields, a part it does not have an empty one. */
function itemPartsOf(parts: { title: string; body: string; link?: string | null; action?: Action | null }): ItemParts {
  return {
    title: parts.title,
    body: parts.body,
    link: parts.link ?? '',
    actionLabel: parts.action?.label ?? '',
    actionUrl: parts.action?.url ?? '',
  }
}

/** The fields of the channel's form as posted (a field not posted is empty). */
function partsOf(channel: string, form: Record<string, string>): Parts | ItemParts {
  if (channel === 'in-app') {
    return {
      title: form.title ?? '',
      body: form.body ?? '',
      link: form.link ?? '',
      actionLabel: form.actionLabel ?? '',
      actionUrl: form.actionUrl ?? '',
    }
  }
  return { subject: form.subject ?? '', textBody: form.textBody ?? '', htmlBody: form.htmlBody ?? '' }
}

/**
 * The API's body of a form: an email's parts as they are; an item's link and
 * action as the API takes them — none when empty, and an action with either
 * field filled in, so that the API names the one missing.
 */
function bodyOf(parts: Parts | ItemParts) {
  if (!('title' in parts)) return parts
  const action = parts.actionLabel || parts.actionUrl ? { label: parts.actionLabel, url: parts.actionUrl } : null
  return { title: parts.title, body: parts.body, link: parts.link || null, action }
}

templatePages.get('/:kind/:locale/:channel', needsViewer, async (c) => {
  const props = await editorProps(c)
  if (!props.found) return c.notFound()
  return c.html(<Editor {...props} />)
})

// A POST that changes nothing: a viewer may preview.
templatePages.post('/:kind/:locale/:channel/preview', needsViewer, async (c) => {
  const { kind, locale, channel } = c.req.param()
  const parts = partsOf(channel, (await c.req.parseBody()) as Record<string, string>)
  const answer = await c.get('api')<Rendered | Item>('POST', '/v1/templates/preview', {
    kind,
    locale,
    channel,
    ...bodyOf(parts),
  })
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
  const parts = partsOf(channel, (await c.req.parseBody()) as Record<string, string>)
  const answer = await c.get('api')<Template & { preview: Rendered | Item }>(
    'PUT',
    `/v1/templates${key(kind, locale, channel)}`,
    bodyOf(parts),
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
  const stored = { subject: old.subject, textBody: old.text_body, htmlBody: old.html_body }
  // An in-app version is sent back in the words it is edited with (the API keeps it as it was).
  const parts = channel === 'in-app' ? itemPartsOf(inAppTemplateOf(stored)) : stored
  const answer = await c.get('api')<Template>('PUT', `/v1/templates${key(kind, locale, channel)}`, bodyOf(parts))
  const props = await editorProps(c)
  if (answer.status !== 200) return c.html(<Editor {...props} parts={parts} error={answer.body.error} />, 400)
  return c.html(<Editor {...props} saved={answer.body.version} />)
})
