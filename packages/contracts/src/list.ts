import { z } from 'zod'

/** A comma-separated environment variable as its trimmed, non-empty items, each checked by `item`. */
export function commaList<T extends z.ZodType<unknown, string>>(item: T) {
  return z
    .string()
    .transform((value) =>
      value
        .split(',')
        .map((part) => part.trim())
        .filter(Boolean),
    )
    .pipe(z.array(item))
}
