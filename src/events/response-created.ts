import { z } from 'zod'
import example from '../../examples/arthunt/response.created.json' with { type: 'json' }
import { Actor, Recipient } from '../contracts/arthunt.ts'
import { HttpUrl, Id, Text } from '../contracts/fields.ts'
import { defineEventType } from './define.ts'

/** `data` of `response.created` (AH-MVP-007): a specialist responded to a project; its owner is told. */
export const ResponseCreatedSchema = z.object({
  responseId: Id.describe('the response'),
  projectId: Id.describe('the project responded to'),
  projectTitle: Text.describe('its title, as the owner sees it'),
  recipient: Recipient.describe('the project owner, who is told'),
  actor: Actor.describe('the specialist who responded'),
  proposedPrice: z.number().int().nonnegative().nullish().describe('proposed price, whole roubles'),
  proposedCurrency: z.enum(['RUB']).nullish().describe('currency of the price'),
  proposedDeadlineDays: z.number().int().positive().nullish().describe('proposed deadline, in days'),
  deepLink: HttpUrl.describe('where the owner reads the response'),
})

/** `response.created`: one email to the project owner. */
export const responseCreated = defineEventType({
  family: 'arthunt',
  type: 'response.created',
  summary: 'A specialist responded to a project: its owner is told.',
  schema: ResponseCreatedSchema,
  channels: {
    rabbitmq: { exchange: 'arthunt.notifications', routingKey: 'notifications.email.response.created' },
    outbox: true,
  },
  example: { body: example },
  kinds: [
    {
      name: 'ResponseCreated',
      summary: 'A new response to your project',
      category: 'optional',
      labels: { ru: 'новые отклики на ваши проекты', en: 'new responses to your projects' },
      templates: {
        ru: {
          subject: 'Новый отклик на ваш проект',
          textBody: `Здравствуйте, {{ recipientName }}!

{{ actorName }} откликнулся на ваш проект «{{ projectTitle }}».
{% if proposedPrice %}Предложенная цена: {{ proposedPrice | money: proposedCurrency }}
{% endif %}{% if proposedDeadlineDays %}Срок: {{ proposedDeadlineDays | days }}
{% endif %}
Посмотреть отклик: {{ deepLink }}`,
          htmlBody: `<p>Здравствуйте, {{ recipientName }}!</p>
<p>{{ actorName }} откликнулся на ваш проект «{{ projectTitle }}».</p>
{% if proposedPrice %}<p>Предложенная цена: {{ proposedPrice | money: proposedCurrency }}</p>
{% endif %}{% if proposedDeadlineDays %}<p>Срок: {{ proposedDeadlineDays | days }}</p>
{% endif %}<p><a href="{{ deepLink }}">Посмотреть отклик</a></p>`,
        },
        en: {
          subject: 'New response to your project',
          textBody: `Hello {{ recipientName }},

{{ actorName }} responded to your project "{{ projectTitle }}".
{% if proposedPrice %}Proposed price: {{ proposedPrice | money: proposedCurrency }}
{% endif %}{% if proposedDeadlineDays %}Deadline: {{ proposedDeadlineDays | days }}
{% endif %}
View the response: {{ deepLink }}`,
          htmlBody: `<p>Hello {{ recipientName }},</p>
<p>{{ actorName }} responded to your project "{{ projectTitle }}".</p>
{% if proposedPrice %}<p>Proposed price: {{ proposedPrice | money: proposedCurrency }}</p>
{% endif %}{% if proposedDeadlineDays %}<p>Deadline: {{ proposedDeadlineDays | days }}</p>
{% endif %}<p><a href="{{ deepLink }}">View the response</a></p>`,
        },
      },
      // In the owner's in-app feed (once an operator turns the channel on): one item per response, at
      // once — the digest and the throttle are email's.
      inAppTemplates: {
        ru: {
          title: '{{ actorName }} откликнулся на «{{ projectTitle }}»',
          body: `{% if proposedPrice %}Цена: {{ proposedPrice | money: proposedCurrency }}. {% endif %}{% if proposedDeadlineDays %}Срок: {{ proposedDeadlineDays | days }}.{% endif %}`,
          link: '{{ deepLink }}',
          action: { label: 'Посмотреть отклик', url: '{{ deepLink }}' },
        },
        en: {
          title: '{{ actorName }} responded to "{{ projectTitle }}"',
          body: `{% if proposedPrice %}Price: {{ proposedPrice | money: proposedCurrency }}. {% endif %}{% if proposedDeadlineDays %}Deadline: {{ proposedDeadlineDays | days }}.{% endif %}`,
          link: '{{ deepLink }}',
          action: { label: 'View the response', url: '{{ deepLink }}' },
        },
      },
      // Where the owner has the inbox, a response is shown there at once and emailed only if the owner has
      // not seen it within half an hour; the email then goes as any other (its digest, its throttle).
      escalation: { afterMinutes: 30, unless: 'seen' },
      // Twenty responses in an hour are one email, not twenty: the first opens a 10-minute digest.
      // An owner who chose them one by one still gets at most five an hour: the rest wait for a digest.
      delivery: {
        email: { default: 'digest', digest: { window: { minutes: 10 } }, throttle: { max: 5, windowMinutes: 60 } },
      },
      digestTemplates: {
        ru: {
          subject: `{% assign projects = items | map: "projectTitle" | uniq %}{{ count }} {{ count | plural: "новый отклик", "новых отклика", "новых откликов" }} на {% if projects.size == 1 %}ваш проект «{{ projects.first }}»{% else %}ваши проекты{% endif %}`,
          textBody: `Здравствуйте, {{ recipientName }}!

{% for item in items %}{{ item.actorName }} — «{{ item.projectTitle }}»{% if item.proposedPrice %}, {{ item.proposedPrice | money: item.proposedCurrency }}{% endif %}{% if item.proposedDeadlineDays %}, {{ item.proposedDeadlineDays | days }}{% endif %}
{{ item.deepLink }}
{% endfor %}{% if count > items.size %}
И ещё {{ count | minus: items.size }}.
{% endif %}`,
          htmlBody: `<p>Здравствуйте, {{ recipientName }}!</p>
<ul>
{% for item in items %}<li>{{ item.actorName }} — «{{ item.projectTitle }}»{% if item.proposedPrice %}, {{ item.proposedPrice | money: item.proposedCurrency }}{% endif %}{% if item.proposedDeadlineDays %}, {{ item.proposedDeadlineDays | days }}{% endif %}: <a href="{{ item.deepLink }}">посмотреть отклик</a></li>
{% endfor %}</ul>
{% if count > items.size %}<p>И ещё {{ count | minus: items.size }}.</p>
{% endif %}`,
        },
        en: {
          subject: `{% assign projects = items | map: "projectTitle" | uniq %}{{ count }} {{ count | plural: "new response", "new responses" }} to {% if projects.size == 1 %}your project "{{ projects.first }}"{% else %}your projects{% endif %}`,
          textBody: `Hello {{ recipientName }},

{% for item in items %}{{ item.actorName }} — "{{ item.projectTitle }}"{% if item.proposedPrice %}, {{ item.proposedPrice | money: item.proposedCurrency }}{% endif %}{% if item.proposedDeadlineDays %}, {{ item.proposedDeadlineDays | days }}{% endif %}
{{ item.deepLink }}
{% endfor %}{% if count > items.size %}
And {{ count | minus: items.size }} more.
{% endif %}`,
          htmlBody: `<p>Hello {{ recipientName }},</p>
<ul>
{% for item in items %}<li>{{ item.actorName }} — "{{ item.projectTitle }}"{% if item.proposedPrice %}, {{ item.proposedPrice | money: item.proposedCurrency }}{% endif %}{% if item.proposedDeadlineDays %}, {{ item.proposedDeadlineDays | days }}{% endif %}: <a href="{{ item.deepLink }}">view the response</a></li>
{% endfor %}</ul>
{% if count > items.size %}<p>And {{ count | minus: items.size }} more.</p>
{% endif %}`,
        },
      },
    },
  ],
  intent: ({ payload, traceId }) => ({
    type: 'notify',
    kind: 'ResponseCreated',
    urgency: 'normal',
    recipients: [{ userId: payload.recipient.userId, inline: payload.recipient }],
    model: {
      actorName: payload.actor.displayName,
      projectTitle: payload.projectTitle,
      proposedPrice: payload.proposedPrice ?? null,
      proposedCurrency: payload.proposedCurrency ?? 'RUB',
      proposedDeadlineDays: payload.proposedDeadlineDays ?? null,
      deepLink: payload.deepLink,
    },
    traceId,
  }),
})
