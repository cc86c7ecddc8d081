/**
 * The contracts of notify-edge, in one module that the bridge imports too:
 * the bridge → Worker wire format, the events of ArtHunt and PIN, and the
 * shape-based decoder.
 */

export * from '@notify-edge/contracts'
export * from './arthunt.ts'
export * from './decode.ts'
export * from './pin.ts'
