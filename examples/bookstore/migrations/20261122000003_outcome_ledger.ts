/**
 * Flushwave's outcome ledger: each flush writes one token to it in its own transaction, so that a
 * flush whose connection fails is known to have committed or not (docs/guide/errors.md, The outcome ledger).
 * The statements are Flushwave's own (`ledgerTableSql()`), so they stay what it expects.
 */
import { ledgerTableSql } from 'flushwave'
import type { Knex } from 'knex'

export async function up(knex: Knex): Promise<void> {
  for (const statement of ledgerTableSql()) await knex.raw(statement)
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop table if exists flushwave_outcome')
}
