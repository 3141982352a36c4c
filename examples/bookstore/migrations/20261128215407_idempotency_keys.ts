// 20261128215407_idempotency_keys: written by `flushwave migrate generate --knex`; edit it before it is applied, never after.
// The tables once it is applied are in 20261128215407_idempotency_keys.snapshot.json, from which the next migration is generated.
import type { Knex } from 'knex'

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`create table "flushwave_idempotency" (
  "key" text not null,
  "result" jsonb not null,
  "at" timestamptz not null default now(),
  constraint "flushwave_idempotency_pkey" primary key ("key")
)`)
  await knex.raw(`create index "flushwave_idempotency_at_idx" on "flushwave_idempotency" ("at")`)
}

export async function down(knex: Knex): Promise<void> {
  // flushwave: destructive: drops table "flushwave_idempotency" and its rows
  await knex.raw(`drop table "flushwave_idempotency"`)
}
