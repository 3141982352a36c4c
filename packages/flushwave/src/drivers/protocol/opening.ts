import type { FlushwaveError } from '../../errors.js'
import type { ServerError } from '../port.js'
import { lost } from './failures.js'
import { protocolRefusal, settingsError } from './pg-error.js'

/** The settings statement behind BEGIN failed: `reason` is its error (the executor types it). */
export class SettingsRefused extends Error {
  constructor(readonly reason: unknown) {
    super(`the transaction's settings were refused: ${(reason as Error)?.message ?? String(reason)}`, { cause: reason })
  }
}

/**
 * Runs `fn` while the transaction's settings statement, already sent, is answered: on one
 * connection it goes out ahead of `fn`'s first statement, so it costs no round trip of its own.
 * When it failed, every statement after it failed too (the transaction is aborted, 25P02): its own
 * error is the one that says why, whatever `fn` threw.
 */
export async function afterSettings<T>(applied: PromiseLike<unknown>, fn: () => Promise<T>): Promise<T> {
  const failure = Promise.resolve(applied).then(
    () => undefined,
    (error: unknown) => ({ error }),
  )
  let value: T
  try {
    value = await fn()
  } catch (error) {
    const failed = await failure
    throw failed === undefined ? error : new SettingsRefused(failed.error)
  }
  const failed = await failure
  if (failed !== undefined) throw new SettingsRefused(failed.error)
  return value
}

/** A SettingsRefused as the application sees it: the server's refusal typed, or a lost connection (nothing was committed). */
export function refusal(error: SettingsRefused, normalize: (error: ServerError) => ServerError): FlushwaveError {
  return protocolRefusal(error.reason, normalize, settingsError) ?? lost(error.reason, 'rolled-back', undefined)
}
