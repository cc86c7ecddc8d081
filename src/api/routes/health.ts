import { z } from '@hono/zod-openapi'
import { describeWorker } from '../../health/describe.ts'
import { findingsOf } from '../../health/findings.ts'
import { ADMIN_ERRORS, createRouter, errors, json } from '../openapi.ts'
import { operatorRoute } from '../roles.ts'

const FindingSchema = z
  .object({
    id: z.string().openapi({ example: 'sender-placeholder' }),
    severity: z.enum(['blocker', 'warning', 'info']).openapi({
      description: '`blocker`: no email is delivered until it is fixed; `warning`: something else breaks; `info`',
    }),
    message: z.string(),
    fix: z.string().openapi({ description: 'the command or setting that fixes it' }),
  })
  .openapi('Finding')

// Admin only: it tells which secrets are set and where the deployment is weak. It parses the tokens
// alone, so that it answers while the rest of the configuration is broken: that is what it reports.
const config = operatorRoute(
  'admin',
  {
    method: 'get',
    path: '/config',
    summary: 'What stands between this deployment and a delivered email, each with its fix',
    description:
      "The doctor's findings about this Worker: its sender and Resend's word on its domain, each configured transport's pause or open circuit, its secrets, bindings, cron and console. Admin only (it tells which secrets are set). Answers even when the configuration does not parse: that is a finding. The same rules as `npx notify-edge doctor` and the console's overview.",
    responses: {
      200: json(
        z.object({
          findings: z.array(FindingSchema).openapi({ description: 'blockers first, then warnings, then info' }),
          blockers: z.number().int(),
          checkedAt: z.string(),
        }),
        'The findings',
      ),
      ...errors(...ADMIN_ERRORS),
    },
  },
  { tokensAlone: true },
)

/** `/v1/health`: the configuration's health. */
export const health = createRouter().openapi(config, async (c) => {
  const now = new Date()
  const findings = findingsOf(await describeWorker(c.env, now))
  return c.json(
    {
      findings,
      blockers: findings.filter((finding) => finding.severity === 'blocker').length,
      checkedAt: now.toISOString(),
    },
    200,
  )
})
