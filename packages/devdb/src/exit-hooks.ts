import os from 'node:os'

/**
 * Runs `cleanup` (synchronous) when the process exits, and on SIGINT/SIGTERM, where a process with
 * no other handler for the signal then exits as the signal would have made it. Returns the unhook.
 */
export function cleanUpOnExit(cleanup: () => void): () => void {
  const onSignal = (signal: NodeJS.Signals) => {
    cleanup()
    if (process.listenerCount(signal) === 0) process.exit(128 + (os.constants.signals[signal] ?? 0))
  }
  process.on('exit', cleanup)
  process.once('SIGINT', onSignal)
  process.once('SIGTERM', onSignal)
  return () => {
    process.off('exit', cleanup)
    process.off('SIGINT', onSignal)
    process.off('SIGTERM', onSignal)
  }
}
