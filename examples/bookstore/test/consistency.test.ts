import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestBookstore, type TestBookstore } from './support/bookstore.js'

/**
 * The consistency token without replicas (on a real cluster: cluster-replicas.test.ts): nothing to
 * wait for, so a write sends none; a token a client sends is checked and passed on.
 */
let t: TestBookstore
beforeAll(async () => {
  t = await startTestBookstore({ name: 'bookstore_consistency' })
})
afterAll(async () => {
  await t?.close()
})

describe('Consistency-Token', () => {
  it('is not sent after a write when there are no replicas', async () => {
    const created = await t.call('POST', '/authors', { name: 'Token-less' })
    expect(created.status).toBe(201)
    expect(created.headers.get('consistency-token')).toBeNull()
    expect(created.headers.get('set-cookie')).toBeNull()
  })

  it('is passed on when a client sends one, from the header or the cookie', async () => {
    const created = await t.call('POST', '/authors', { name: 'Token reader' })
    const sent: Record<string, string>[] = [{ 'consistency-token': '0/16B3748' }, { cookie: 'theme=dark; fw_seen=0%2F16B3748' }]
    for (const headers of sent) {
      const read = await t.call('GET', `/authors/${created.body.id}`, undefined, { headers })
      expect(read.status).toBe(200)
      expect(read.headers.get('consistency-token')).toBe('0/16B3748')
    }
  })

  it('answers 400 to a token that is not a WAL position, before any handler runs', async () => {
    for (const token of ['yesterday', '0/16B3748; drop table author', '1/2/3']) {
      const read = await t.call('GET', '/authors', undefined, { headers: { 'consistency-token': token } })
      expect(read.status).toBe(400)
      expect(read.body).toEqual({ error: 'invalid consistency token', token })
    }
  })
})
