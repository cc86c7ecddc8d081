-- Seed templates (Russian and English) for the five kinds, as first released. The defaults now live in
-- the event-type modules (src/events); these rows are the stored version 1 of each.
INSERT INTO templates (kind, locale, channel, version, subject, text_body, html_body, active, created_at) VALUES ('ResponseCreated', 'ru', 'email', 1, 'Новый отклик на ваш проект', 'Здравствуйте, {{ recipientName }}!

{{ actorName }} откликнулся на ваш проект «{{ projectTitle }}».
{% if proposedPrice %}Предложенная цена: {{ proposedPrice | money: proposedCurrency }}
{% endif %}{% if proposedDeadlineDays %}Срок: {{ proposedDeadlineDays | days }}
{% endif %}
Посмотреть отклик: {{ deepLink }}', '<p>Здравствуйте, {{ recipientName }}!</p>
<p>{{ actorName }} откликнулся на ваш проект «{{ projectTitle }}».</p>
{% if proposedPrice %}<p>Предложенная цена: {{ proposedPrice | money: proposedCurrency }}</p>
{% endif %}{% if proposedDeadlineDays %}<p>Срок: {{ proposedDeadlineDays | days }}</p>
{% endif %}<p><a href="{{ deepLink }}">Посмотреть отклик</a></p>', 1, '2026-11-29T00:00:00.000Z');
INSERT INTO templates (kind, locale, channel, version, subject, text_body, html_body, active, created_at) VALUES ('ResponseCreated', 'en', 'email', 1, 'New response to your project', 'Hello {{ recipientName }},

{{ actorName }} responded to your project "{{ projectTitle }}".
{% if proposedPrice %}Proposed price: {{ proposedPrice | money: proposedCurrency }}
{% endif %}{% if proposedDeadlineDays %}Deadline: {{ proposedDeadlineDays | days }}
{% endif %}
View the response: {{ deepLink }}', '<p>Hello {{ recipientName }},</p>
<p>{{ actorName }} responded to your project "{{ projectTitle }}".</p>
{% if proposedPrice %}<p>Proposed price: {{ proposedPrice | money: proposedCurrency }}</p>
{% endif %}{% if proposedDeadlineDays %}<p>Deadline: {{ proposedDeadlineDays | days }}</p>
{% endif %}<p><a href="{{ deepLink }}">View the response</a></p>', 1, '2026-11-29T00:00:00.000Z');
INSERT INTO templates (kind, locale, channel, version, subject, text_body, html_body, active, created_at) VALUES ('InvitationCreated', 'ru', 'email', 1, 'Вас пригласили в проект', 'Здравствуйте, {{ recipientName }}!

{{ actorName }} приглашает вас {% if projectTitle %}в проект «{{ projectTitle }}»{% else %}к сотрудничеству{% endif %}.
{% if message %}
Сообщение: {{ message }}
{% endif %}
Открыть приглашение: {{ deepLink }}', '<p>Здравствуйте, {{ recipientName }}!</p>
<p>{{ actorName }} приглашает вас {% if projectTitle %}в проект «{{ projectTitle }}»{% else %}к сотрудничеству{% endif %}.</p>
{% if message %}<blockquote>{{ message }}</blockquote>
{% endif %}<p><a href="{{ deepLink }}">Открыть приглашение</a></p>', 1, '2026-11-29T00:00:00.000Z');
INSERT INTO templates (kind, locale, channel, version, subject, text_body, html_body, active, created_at) VALUES ('InvitationCreated', 'en', 'email', 1, 'You are invited to a project', 'Hello {{ recipientName }},

{{ actorName }} invites you {% if projectTitle %}to the project "{{ projectTitle }}"{% else %}to work together{% endif %}.
{% if message %}
Message: {{ message }}
{% endif %}
Open the invitation: {{ deepLink }}', '<p>Hello {{ recipientName }},</p>
<p>{{ actorName }} invites you {% if projectTitle %}to the project "{{ projectTitle }}"{% else %}to work together{% endif %}.</p>
{% if message %}<blockquote>{{ message }}</blockquote>
{% endif %}<p><a href="{{ deepLink }}">Open the invitation</a></p>', 1, '2026-11-29T00:00:00.000Z');
INSERT INTO templates (kind, locale, channel, version, subject, text_body, html_body, active, created_at) VALUES ('VerificationSubmitted', 'ru', 'email', 1, 'Новая заявка на верификацию', 'Здравствуйте{% if recipientName %}, {{ recipientName }}{% endif %}!

Поступила новая заявка на верификацию персональных данных (заявка {{ requestId }}). Пожалуйста, рассмотрите её.', '<p>Здравствуйте{% if recipientName %}, {{ recipientName }}{% endif %}!</p>
<p>Поступила новая заявка на верификацию персональных данных (заявка {{ requestId }}). Пожалуйста, рассмотрите её.</p>', 1, '2026-11-29T00:00:00.000Z');
INSERT INTO templates (kind, locale, channel, version, subject, text_body, html_body, active, created_at) VALUES ('VerificationSubmitted', 'en', 'email', 1, 'New verification request', 'Hello{% if recipientName %} {{ recipientName }}{% endif %},

A new personal data verification request is waiting for your review (request {{ requestId }}).', '<p>Hello{% if recipientName %} {{ recipientName }}{% endif %},</p>
<p>A new personal data verification request is waiting for your review (request {{ requestId }}).</p>', 1, '2026-11-29T00:00:00.000Z');
INSERT INTO templates (kind, locale, channel, version, subject, text_body, html_body, active, created_at) VALUES ('VerificationApproved', 'ru', 'email', 1, 'Верификация пройдена', 'Здравствуйте{% if recipientName %}, {{ recipientName }}{% endif %}!

Ваши персональные данные успешно прошли верификацию.', '<p>Здравствуйте{% if recipientName %}, {{ recipientName }}{% endif %}!</p>
<p>Ваши персональные данные успешно прошли верификацию.</p>', 1, '2026-11-29T00:00:00.000Z');
INSERT INTO templates (kind, locale, channel, version, subject, text_body, html_body, active, created_at) VALUES ('VerificationApproved', 'en', 'email', 1, 'Your verification is approved', 'Hello{% if recipientName %} {{ recipientName }}{% endif %},

Your personal data has been verified.', '<p>Hello{% if recipientName %} {{ recipientName }}{% endif %},</p>
<p>Your personal data has been verified.</p>', 1, '2026-11-29T00:00:00.000Z');
INSERT INTO templates (kind, locale, channel, version, subject, text_body, html_body, active, created_at) VALUES ('VerificationRejected', 'ru', 'email', 1, 'Верификация отклонена', 'Здравствуйте{% if recipientName %}, {{ recipientName }}{% endif %}!

К сожалению, верификация ваших персональных данных отклонена.{% if reason %}
Причина: {{ reason }}{% endif %}

Вы можете исправить данные и подать заявку снова.', '<p>Здравствуйте{% if recipientName %}, {{ recipientName }}{% endif %}!</p>
<p>К сожалению, верификация ваших персональных данных отклонена.</p>
{% if reason %}<p>Причина: {{ reason }}</p>
{% endif %}<p>Вы можете исправить данные и подать заявку снова.</p>', 1, '2026-11-29T00:00:00.000Z');
INSERT INTO templates (kind, locale, channel, version, subject, text_body, html_body, active, created_at) VALUES ('VerificationRejected', 'en', 'email', 1, 'Your verification was rejected', 'Hello{% if recipientName %} {{ recipientName }}{% endif %},

Unfortunately, the verification of your personal data was rejected.{% if reason %}
Reason: {{ reason }}{% endif %}

You can correct your data and submit a new request.', '<p>Hello{% if recipientName %} {{ recipientName }}{% endif %},</p>
<p>Unfortunately, the verification of your personal data was rejected.</p>
{% if reason %}<p>Reason: {{ reason }}</p>
{% endif %}<p>You can correct your data and submit a new request.</p>', 1, '2026-11-29T00:00:00.000Z');
