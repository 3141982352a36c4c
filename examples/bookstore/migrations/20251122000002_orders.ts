/** Customers, orders and their lines, stock per book and the audit log: what POST /checkout writes. */
import type { Knex } from 'knex'
import { foreignKey, identityId } from './helpers.js'

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('customer', (table) => {
    identityId(table, 'customer')
    table.text('name').notNullable()
    table.text('email').notNullable().unique({ indexName: 'customer_email_key' })
    table.integer('order_count').notNullable().defaultTo(0)
    table.integer('version').notNullable().defaultTo(1)
  })

  await knex.schema.createTable('order', (table) => {
    identityId(table, 'order')
    table.text('reference').unique({ indexName: 'order_reference_key' })
    table.enu('status', ['placed', 'shipped', 'cancelled'], { useNative: true, enumName: 'order_status' }).notNullable().defaultTo('placed')
    table.decimal('total', null).notNullable()
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.raw('now()'))
    foreignKey(table, 'order', 'customer_id', 'customer', { notNull: true })
  })

  await knex.schema.createTable('order_line', (table) => {
    identityId(table, 'order_line')
    foreignKey(table, 'order_line', 'order_id', 'order', { notNull: true, onDelete: 'CASCADE' })
    foreignKey(table, 'order_line', 'book_id', 'book', { notNull: false, onDelete: 'SET NULL' })
    table.text('title').notNullable()
    table.integer('quantity').notNullable()
    table.decimal('unit_price', null).notNullable()
    table.check('?? between 1 and 100', ['quantity'], 'order_line_quantity_check')
  })

  await knex.schema.createTable('stock', (table) => {
    identityId(table, 'stock')
    foreignKey(table, 'stock', 'book_id', 'book', { notNull: true, onDelete: 'CASCADE' })
    table.integer('quantity').notNullable()
    table.integer('version').notNullable().defaultTo(1)
    // One stock row per book, never below zero: the last line of defence of POST /checkout.
    table.unique(['book_id'], { indexName: 'stock_book_id_key' })
    table.check('?? >= 0', ['quantity'], 'stock_quantity_check')
  })

  await knex.schema.createTable('audit_log', (table) => {
    identityId(table, 'audit_log')
    table.text('action').notNullable()
    table.text('subject').notNullable()
    table.jsonb('detail').notNullable()
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.raw('now()'))
    foreignKey(table, 'audit_log', 'order_id', 'order', { notNull: false, onDelete: 'SET NULL' })
  })
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['audit_log', 'stock', 'order_line', 'order', 'customer']) await knex.schema.dropTableIfExists(table)
  await knex.raw('drop type if exists ??', ['order_status'])
}
