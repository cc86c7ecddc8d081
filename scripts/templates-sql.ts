/**
 * Prints migrations/d1/0003_templates.sql from the seed templates below, so the
 * migration's escaping is never done by hand: `node scripts/templates-sql.ts > migrations/d1/0003_templates.sql`.
 */
type Template = { kind: string; locale: string; subject: string; text: string; html: string }

const templates: Template[] = [
  {
    kind: 'ResponseCreated',
    locale: 'ru',
    subject: 'Новый отклик на ваш проект',
    text: `Здравствуйте, {{ recipientName }}!

{{ actorName }} откликнулся на ваш проект «{{ projectTitle }}».
{% if proposedPrice %}Предложенная цена: {{ proposedPrice | money: proposedCurrency }}
{% endif %}{% if proposedDeadlineDays %}Срок: {{ proposedDeadlineDays | days }}
{% endif %}
Посмотреть отклик: {{ deepLink }}`,
    html: `<p>Здравствуйте, {{ recipientName }}!</p>
<p>{{ actorName }} откликнулся на ваш проект «{{ projectTitle }}».</p>
{% if proposedPrice %}<p>Предложенная цена: {{ proposedPrice | money: proposedCurrency }}</p>
{% endif %}{% if proposedDeadlineDays %}<p>Срок: {{ proposedDeadlineDays | days }}</p>
{% endif %}<p><a href="{{ deepLink }}">Посмотреть отклик</a></p>`,
  },
  {
    kind: 'ResponseCreated',
    locale: 'en',
    subject: 'New response to your project',
    text: `Hello {{ recipientName }},

{{ actorName }} responded to your project "{{ projectTitle }}".
{% if proposedPrice %}Proposed price: {{ proposedPrice | money: proposedCurrency }}
{% endif %}{% if proposedDeadlineDays %}Deadline: {{ proposedDeadlineDays | days }}
{% endif %}
View the response: {{ deepLink }}`,
    html: `<p>Hello {{ recipientName }},</p>
<p>{{ actorName }} responded to your project "{{ projectTitle }}".</p>
{% if proposedPrice %}<p>Proposed price: {{ proposedPrice | money: proposedCurrency }}</p>
{% endif %}{% if proposedDeadlineDays %}<p>Deadline: {{ proposedDeadlineDays | days }}</p>
{% endif %}<p><a href="{{ deepLink }}">View the response</a></p>`,
  },
  {
    kind: 'InvitationCreated',
    locale: 'ru',
    subject: 'Вас пригласили в проект',
    text: `Здравствуйте, {{ recipientName }}!

{{ actorName }} приглашает вас {% if projectTitle %}в проект «{{ projectTitle }}»{% else %}к сотрудничеству{% endif %}.
{% if message %}
Сообщение: {{ message }}
{% endif %}
Открыть приглашение: {{ deepLink }}`,
    html: `<p>Здравствуйте, {{ recipientName }}!</p>
<p>{{ actorName }} приглашает вас {% if projectTitle %}в проект «{{ projectTitle }}»{% else %}к сотрудничеству{% endif %}.</p>
{% if message %}<blockquote>{{ message }}</blockquote>
{% endif %}<p><a href="{{ deepLink }}">Открыть приглашение</a></p>`,
  },
  {
    kind: 'InvitationCreated',
    locale: 'en',
    subject: 'You are invited to a project',
    text: `Hello {{ recipientName }},

{{ actorName }} invites you {% if projectTitle %}to the project "{{ projectTitle }}"{% else %}to work together{% endif %}.
{% if message %}
Message: {{ message }}
{% endif %}
Open the invitation: {{ deepLink }}`,
    html: `<p>Hello {{ recipientName }},</p>
<p>{{ actorName }} invites you {% if projectTitle %}to the project "{{ projectTitle }}"{% else %}to work together{% endif %}.</p>
{% if message %}<blockquote>{{ message }}</blockquote>
{% endif %}<p><a href="{{ deepLink }}">Open the invitation</a></p>`,
  },
  {
    kind: 'VerificationSubmitted',
    locale: 'ru',
    subject: 'Новая заявка на верификацию',
    text: `Здравствуйте{% if recipientName %}, {{ recipientName }}{% endif %}!

Поступила новая заявка на верификацию персональных данных (заявка {{ requestId }}). Пожалуйста, рассмотрите её.`,
    html: `<p>Здравствуйте{% if recipientName %}, {{ recipientName }}{% endif %}!</p>
<p>Поступила новая заявка на верификацию персональных данных (заявка {{ requestId }}). Пожалуйста, рассмотрите её.</p>`,
  },
  {
    kind: 'VerificationSubmitted',
    locale: 'en',
    subject: 'New verification request',
    text: `Hello{% if recipientName %} {{ recipientName }}{% endif %},

A new personal data verification request is waiting for your review (request {{ requestId }}).`,
    html: `<p>Hello{% if recipientName %} {{ recipientName }}{% endif %},</p>
<p>A new personal data verification request is waiting for your review (request {{ requestId }}).</p>`,
  },
  {
    kind: 'VerificationApproved',
    locale: 'ru',
    subject: 'Верификация пройдена',
    text: `Здравствуйте{% if recipientName %}, {{ recipientName }}{% endif %}!

Ваши персональные данные успешно прошли верификацию.`,
    html: `<p>Здравствуйте{% if recipientName %}, {{ recipientName }}{% endif %}!</p>
<p>Ваши персональные данные успешно прошли верификацию.</p>`,
  },
  {
    kind: 'VerificationApproved',
    locale: 'en',
    subject: 'Your verification is approved',
    text: `Hello{% if recipientName %} {{ recipientName }}{% endif %},

Your personal data has been verified.`,
    html: `<p>Hello{% if recipientName %} {{ recipientName }}{% endif %},</p>
<p>Your personal data has been verified.</p>`,
  },
  {
    kind: 'VerificationRejected',
    locale: 'ru',
    subject: 'Верификация отклонена',
    text: `Здравствуйте{% if recipientName %}, {{ recipientName }}{% endif %}!

К сожалению, верификация ваших персональных данных отклонена.{% if reason %}
Причина: {{ reason }}{% endif %}

Вы можете исправить данные и подать заявку снова.`,
    html: `<p>Здравствуйте{% if recipientName %}, {{ recipientName }}{% endif %}!</p>
<p>К сожалению, верификация ваших персональных данных отклонена.</p>
{% if reason %}<p>Причина: {{ reason }}</p>
{% endif %}<p>Вы можете исправить данные и подать заявку снова.</p>`,
  },
  {
    kind: 'VerificationRejected',
    locale: 'en',
    subject: 'Your verification was rejected',
    text: `Hello{% if recipientName %} {{ recipientName }}{% endif %},

Unfortunately, the verification of your personal data was rejected.{% if reason %}
Reason: {{ reason }}{% endif %}

You can correct your data and submit a new request.`,
    html: `<p>Hello{% if recipientName %} {{ recipientName }}{% endif %},</p>
<p>Unfortunately, the verification of your personal data was rejected.</p>
{% if reason %}<p>Reason: {{ reason }}</p>
{% endif %}<p>You can correct your data and submit a new request.</p>`,
  },
]

const quote = (value: string) => `'${value.replaceAll("'", "''")}'`

console.log('-- Seed templates (Russian and English) for the five kinds. Generated by scripts/templates-sql.ts.')
for (const t of templates) {
  console.log(
    `INSERT INTO templates (kind, locale, channel, version, subject, text_body, html_body, active, created_at) VALUES (${[
      quote(t.kind),
      quote(t.locale),
      quote('email'),
      '1',
      quote(t.subject),
      quote(t.text),
      quote(t.html),
      '1',
      quote('2026-11-29T00:00:00.000Z'),
    ].join(', ')});`,
  )
}
