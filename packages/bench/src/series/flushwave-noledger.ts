import { flushwaveSeries, writesOnly } from './flushwave.js'

/**
 * Flushwave without the outcome ledger (`outcomeLedger: false`): the flush's first statement only
 * captures the transaction id instead of also writing (and now and then pruning) its token. Side by
 * side with `flushwave`, it shows what the ledger costs.
 */
export const series = writesOnly(flushwaveSeries('flushwave-noledger', undefined, { outcomeLedger: false }))
