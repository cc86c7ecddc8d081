import { z } from 'zod'
import example from '../../examples/pin/contact-upserted.json' with { type: 'json' }
import { Locale, RequiredId, TimeZone } from '../contracts/fields.ts'
import { defineEventType } from './define.ts'

/** Payload of `contact-upserted`: the address book the PIN events' recipients are read from. */
export const ContactUpsertedSchema = z.object({
  UserId: RequiredId.describe('the user'),
  Email: z.email().describe('their address'),
  Locale: Locale.nullish().describe('BCP 47 locale of their emails'),
  TimeZone: TimeZone.nullish().describe('IANA time zone, for quiet hours'),
  DisplayName: z.string().max(500).nullish().describe('how emails greet them'),
  Version: z.number().int().nonnegative().describe('monotonic per user: an older version never overwrites a newer one'),
})

/** `contact-upserted`: feeds the contact replica; no notification of its own. */
export const contactUpserted = defineEventType({
  family: 'pin',
  type: 'contact-upserted',
  summary: 'A contact changed: the replica that PIN recipients are read from is updated (no email).',
  schema: ContactUpsertedSchema,
  channels: { kafka: { topic: 'pin.identity.contacts.v1' } },
  example: { body: example.value, headers: example.headers },
  kinds: [],
  intent: ({ payload }) => ({
    type: 'contact',
    contact: {
      userId: payload.UserId,
      email: payload.Email,
      locale: payload.Locale ?? null,
      timeZone: payload.TimeZone ?? null,
      displayName: payload.DisplayName ?? null,
      version: payload.Version,
    },
  }),
})
