import invitationCreated from '../../examples/arthunt/invitation.created.json'
import responseCreated from '../../examples/arthunt/response.created.json'
import verificationCompleted from '../../examples/pin/verification-completed.json'
import verificationSubmitted from '../../examples/pin/verification-request-submitted.json'
import { decodeInbound } from '../contracts/index.ts'
import { intentOf, type Kind } from '../materialize/kinds.ts'

function inbound(body: unknown, headers: Record<string, string> = {}) {
  return {
    source: 'http' as const,
    origin: 'examples',
    sourceMessageId: 'example',
    receivedAt: new Date(0).toISOString(),
    headers,
    body: JSON.stringify(body),
  }
}

function modelOf(body: unknown, headers?: Record<string, string>): Record<string, unknown> {
  const decoded = decodeInbound(inbound(body, headers))
  if (decoded.status !== 'valid') throw new Error('an example in examples/ does not validate')
  const intent = intentOf(decoded.event, new Date().toISOString())
  if (intent.type !== 'notify') throw new Error('an example in examples/ does not notify')
  const name = decoded.event.contract === 'arthunt' ? decoded.event.data.recipient.displayName : 'Анна Клиент'
  return { ...intent.model, recipientName: name }
}

const approved = { ...verificationCompleted.value, Decision: 'approved', Reason: null }

/**
 * A template model per kind, from the samples in examples/, so that a new
 * template is rendered once with realistic data before it is saved.
 */
export const EXAMPLE_MODELS: Record<Kind, Record<string, unknown>> = {
  ResponseCreated: modelOf(responseCreated),
  InvitationCreated: modelOf(invitationCreated),
  VerificationSubmitted: modelOf(verificationSubmitted.value, verificationSubmitted.headers),
  VerificationApproved: modelOf(approved, verificationCompleted.headers),
  VerificationRejected: modelOf(verificationCompleted.value, verificationCompleted.headers),
}
