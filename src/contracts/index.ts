/**
 * The Worker's contracts in one module: the bridge → Worker wire format (from
 * `@notify-edge/contracts`, the package the bridge imports on its own), the
 * events of ArtHunt and PIN. The decoder that tells them apart by shape is
 * src/events/decode-inbound.ts, beside the registry it consults. The bridge does not
 * import this module: it neither decodes events nor knows their contracts.
 */

export * from '@notify-edge/contracts'
export * from './arthunt.ts'
export * from './pin.ts'
