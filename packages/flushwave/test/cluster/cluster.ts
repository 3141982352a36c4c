import { execFileSync } from 'node:child_process'

/**
 * The cluster scripts/patroni-cluster.sh runs (three Patroni-managed PostgreSQL 15 nodes, etcd,
 * HAProxy), as its exports describe it. Without them the cluster suites are skipped:
 *   scripts/patroni-cluster.sh pnpm exec vitest run packages/flushwave/test/cluster
 */
export const cluster = process.env.CLUSTER_PRIMARY_URL === undefined ? undefined : clusterFromEnv()

function clusterFromEnv() {
  const env = (name: string): string => {
    const value = process.env[name]
    if (value === undefined) throw new Error(`${name} is not set: run the cluster suites through scripts/patroni-cluster.sh`)
    return value
  }
  const script = env('CLUSTER_SCRIPT')
  const run = (...args: string[]): string => execFileSync(script, args, { encoding: 'utf8', timeout: 120_000 }).trim()
  const patronictl = env('CLUSTER_PATRONICTL').split(' ')
  return {
    /** Through HAProxy's primary listener. */
    primaryUrl: env('CLUSTER_PRIMARY_URL'),
    /** Each node directly, node 1 first. */
    nodeUrls: env('CLUSTER_NODE_URLS').split(','),
    superuserNodeUrls: env('CLUSTER_SUPERUSER_NODE_URLS').split(','),
    superuserUrl: env('CLUSTER_SUPERUSER_URL'),
    synchronous: process.env.CLUSTER_SYNC !== '0',
    /** The leader's node number (1, 2 or 3). */
    leader: (): number => Number(run('leader')),
    killPostmaster: (node: number): void => void run('kill-postmaster', String(node)),
    /** Waits until a leader, two streaming replicas and (synchronous) a synchronous standby. */
    waitHealthy: (seconds = 90): string => run('wait-healthy', String(seconds)),
    patronictl: (...args: string[]): string => execFileSync(patronictl[0]!, [...patronictl.slice(1), ...args], { encoding: 'utf8', timeout: 120_000 }).trim(),
  }
}
