import { z } from 'zod'

/** Any 8-4-4-4-12 hex id: producers are Go and .NET, and not every id they send is an RFC 4122 variant. */
export const Id = z.guid()

const NIL_GUID = '00000000-0000-0000-0000-000000000000'

/** A required identifier: a GUID that is not the empty GUID (the PIN profile-events spec: "обязательные идентификаторы непусты"). */
export const RequiredId = z.guid().refine((value) => value !== NIL_GUID, { message: 'must not be the empty GUID' })

/** ISO-8601 timestamp with `Z` or an offset. */
export const Timestamp = z.iso.datetime({ offset: true })

/** A link put into an email: only http(s), never `javascript:` and friends. */
export const HttpUrl = z.url({ protocol: /^https?$/ })

/** A non-empty string after trimming. */
export const Text = z.string().trim().min(1)

/** IANA time zone name that this runtime's ICU knows. */
export const TimeZone = z.string().refine(
  (value) => {
    try {
      new Intl.DateTimeFormat('en', { timeZone: value })
      return true
    } catch {
      return false
    }
  },
  { message: 'unknown IANA time zone' },
)

/** BCP 47 locale tag such as `ru-RU` or `en`. */
export const Locale = z.string().refine(
  (value) => {
    try {
      return Intl.getCanonicalLocales(value).length === 1
    } catch {
      return false
    }
  },
  { message: 'not a BCP 47 locale tag' },
)

/** A local time of day, `HH:MM` on a 24-hour clock (quiet hours, a daily digest). */
export const CLOCK_PATTERN = /^([01]\d|2[0-3]):[0-5]\d$/

/**
 * The key a cancellation names to withdraw what an event notified (an
 * invitation's id …): up to 200 characters, what the producer chose.
 */
export const CancellationKey = z.string().trim().min(1).max(200)
