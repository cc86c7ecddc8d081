import { html } from 'hono/html'
import type { HtmlEscapedString } from 'hono/utils/html'

/** The languages the unsubscribe pages speak. */
export type PageLocale = 'ru' | 'en'

/** The language of a page: the first of Accept-Language this Worker speaks, else the default locale's, else English. */
export function pageLocaleOf(acceptLanguage: string | undefined, defaultLocale: string): PageLocale {
  const wanted = (acceptLanguage ?? '')
    .split(',')
    .map((part) => part.trim().slice(0, 2).toLowerCase())
    .concat(defaultLocale.slice(0, 2).toLowerCase())
  return (wanted.find((code) => code === 'ru' || code === 'en') as PageLocale | undefined) ?? 'en'
}

const TEXT = {
  ru: {
    confirmTitle: 'Отписка',
    confirm: (label: string) => `Больше не присылать письма: ${label}?`,
    button: 'Отписаться',
    doneTitle: 'Вы отписались',
    done: (label: string) => `Писем «${label}» больше не будет.`,
    invalidTitle: 'Ссылка недействительна',
    invalid: 'Эта ссылка на отписку повреждена или устарела. Ничего не изменено.',
  },
  en: {
    confirmTitle: 'Unsubscribe',
    confirm: (label: string) => `Stop sending emails about ${label}?`,
    button: 'Unsubscribe',
    doneTitle: 'You are unsubscribed',
    done: (label: string) => `You will get no more emails about ${label}.`,
    invalidTitle: 'This link is not valid',
    invalid: 'This unsubscribe link is damaged or out of date. Nothing was changed.',
  },
} as const

function page(locale: PageLocale, title: string, body: HtmlEscapedString | Promise<HtmlEscapedString>) {
  return html`<!doctype html>
<html lang="${locale}">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex"><title>${title}</title></head>
<body style="font-family: system-ui, sans-serif; max-width: 32rem; margin: 4rem auto; padding: 0 1rem">
<h1>${title}</h1>
${body}
</body>
</html>`
}

/**
 * What a GET of the link shows: the question and a button that POSTs to the
 * same address. A GET never changes anything: mail scanners and link
 * previewers fetch links nobody clicked.
 */
export function confirmPage(locale: PageLocale, label: string) {
  const text = TEXT[locale]
  return page(
    locale,
    text.confirmTitle,
    html`<p>${text.confirm(label)}</p>
<form method="post"><input type="hidden" name="List-Unsubscribe" value="One-Click"><button type="submit">${text.button}</button></form>`,
  )
}

/** After the POST: done (also when it was done before). */
export function donePage(locale: PageLocale, label: string) {
  const text = TEXT[locale]
  return page(locale, text.doneTitle, html`<p>${text.done(label)}</p>`)
}

/** A link this Worker did not sign, or one cut short: nothing changed. */
export function invalidPage(locale: PageLocale) {
  const text = TEXT[locale]
  return page(locale, text.invalidTitle, html`<p>${text.invalid}</p>`)
}
