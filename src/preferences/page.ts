import { html } from 'hono/html'
import type { HtmlEscapedString } from 'hono/utils/html'
import type { DeliveryMode, DigestSchedule } from '../events/define.ts'
import { CHOICES, type Choice } from './choice.ts'

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

const ruPlural = new Intl.PluralRules('ru')

/** A Russian count's noun: `forms` are the one, few and many forms (минуту, минуты, минут). */
function ruForm(count: number, forms: readonly [string, string, string]): string {
  const rule = ruPlural.select(count)
  return forms[rule === 'one' ? 0 : rule === 'few' ? 1 : 2]
}

const RU_UNITS = { minute: ['минуту', 'минуты', 'минут'], hour: ['час', 'часа', 'часов'] } as const

const TEXT = {
  ru: {
    confirmTitle: 'Отписка',
    confirm: (label: string) => `Больше не присылать письма: ${label}?`,
    button: 'Отписаться',
    doneTitle: 'Вы отписались',
    done: (label: string) => `Писем «${label}» больше не будет.`,
    invalidTitle: 'Ссылка недействительна',
    invalid: 'Эта ссылка на отписку повреждена или устарела. Ничего не изменено.',
    chooseTitle: 'Настройка писем',
    choose: (label: string) => `Как присылать письма: ${label}?`,
    choices: {
      instant: () => 'Сразу, отдельным письмом о каждом',
      digest: (schedule: string) => `Сводкой: ${schedule}`,
      off: () => 'Не присылать',
    },
    save: 'Сохранить',
    savedTitle: 'Сохранено',
    saved: (label: string, mode: DeliveryMode, schedule: string) =>
      mode === 'digest'
        ? `Письма «${label}» будут приходить сводкой: ${schedule}.`
        : `Письма «${label}» будут приходить сразу, отдельным письмом о каждом.`,
    change: 'Изменить',
    every: (count: number, unit: 'minute' | 'hour') =>
      count === 1
        ? `одно письмо раз в ${RU_UNITS[unit][0]}`
        : `одно письмо раз в ${count} ${ruForm(count, RU_UNITS[unit])}`,
    daily: (at: string) => `одно письмо в день, в ${at} по вашему времени`,
    refusedTitle: 'Не сохранено',
    refused: (label: string) => `Такого выбора для писем «${label}» нет. Ничего не изменено.`,
  },
  en: {
    confirmTitle: 'Unsubscribe',
    confirm: (label: string) => `Stop sending emails about ${label}?`,
    button: 'Unsubscribe',
    doneTitle: 'You are unsubscribed',
    done: (label: string) => `You will get no more emails about ${label}.`,
    invalidTitle: 'This link is not valid',
    invalid: 'This unsubscribe link is damaged or out of date. Nothing was changed.',
    chooseTitle: 'Email settings',
    choose: (label: string) => `How should we send you emails about ${label}?`,
    choices: {
      instant: () => 'At once, an email for each',
      digest: (schedule: string) => `Together: ${schedule}`,
      off: () => 'Not at all',
    },
    save: 'Save',
    savedTitle: 'Saved',
    saved: (label: string, mode: DeliveryMode, schedule: string) =>
      mode === 'digest'
        ? `Emails about ${label} will come together: ${schedule}.`
        : `Emails about ${label} will come at once, an email for each.`,
    change: 'Change',
    every: (count: number, unit: 'minute' | 'hour') =>
      count === 1 ? `one email every ${unit}` : `one email every ${count} ${unit}s`,
    daily: (at: string) => `one email a day, at ${at} your time`,
    refusedTitle: 'Not saved',
    refused: (label: string) => `There is no such choice for emails about ${label}. Nothing was changed.`,
  },
} as const

/** When a digest comes, as a recipient reads it: "one email every 10 minutes", "one email a day, at 09:00 your time". */
export function scheduleInWords(locale: PageLocale, schedule: DigestSchedule): string {
  const text = TEXT[locale]
  if ('daily' in schedule) return text.daily(schedule.daily.at)
  const { minutes } = schedule.window
  return minutes % 60 === 0 ? text.every(minutes / 60, 'hour') : text.every(minutes, 'minute')
}

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

/**
 * What a GET of the link shows for a kind with a digest: instant, digest (its
 * schedule in words) or off, the one in effect checked, and a button that
 * POSTs the choice to the same address. Changes nothing, like the confirm page.
 */
export function choicePage(locale: PageLocale, label: string, schedule: DigestSchedule, current: Choice) {
  const text = TEXT[locale]
  const words = scheduleInWords(locale, schedule)
  const options = CHOICES.map(
    (choice) =>
      html`<p><label><input type="radio" name="mode" value="${choice}"${choice === current ? html` checked` : ''}> ${text.choices[choice](words)}</label></p>`,
  )
  return page(
    locale,
    text.chooseTitle,
    html`<form method="post"><fieldset><legend>${text.choose(label)}</legend>
${options}
</fieldset><p><button type="submit">${text.save}</button></p></form>`,
  )
}

/**
 * After a POST of instant or digest from the choice page (off answers with
 * `donePage`); `schedule` is the kind's digest on the channel, if it has one.
 */
export function savedPage(locale: PageLocale, label: string, mode: DeliveryMode, schedule: DigestSchedule | undefined) {
  const text = TEXT[locale]
  return page(
    locale,
    text.savedTitle,
    html`<p>${text.saved(label, mode, schedule ? scheduleInWords(locale, schedule) : '')}</p>
<p><a href="">${text.change}</a></p>`,
  )
}

/** A choice the kind does not offer, or none of the page's: nothing changed. */
export function refusedChoicePage(locale: PageLocale, label: string) {
  const text = TEXT[locale]
  return page(locale, text.refusedTitle, html`<p>${text.refused(label)}</p>`)
}

/** A link this Worker did not sign, or one cut short: nothing changed. */
export function invalidPage(locale: PageLocale) {
  const text = TEXT[locale]
  return page(locale, text.invalidTitle, html`<p>${text.invalid}</p>`)
}
