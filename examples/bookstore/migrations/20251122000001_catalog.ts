/**
 * Authors, books, reviews and tags. Constraint and index names are the ones PostgreSQL gives the
 * DDL of `createTablesSql(schema)` (author_pkey, author_email_key, book_author_id_fkey,
 * book_author_id_idx…), so error messages and test/migrations.test.ts compare one to one.
 */
import type { Knex } from 'knex'
import { foreignKey, identityId } from './helpers.js'

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('author', (table) => {
    identityId(table, 'author')
    table.text('name').notNullable()
    table.text('email').unique({ indexName: 'author_email_key' })
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.raw('now()'))
  })

  await knex.schema.createTable('book', (table) => {
    identityId(table, 'book')
    table.text('title').notNullable()
    table.decimal('price', null).notNullable()
    table.integer('pages')
    table.boolean('published').notNullable().defaultTo(false)
    table.decimal('rating', null).notNullable().defaultTo('0.00')
    table.integer('review_count').notNullable().defaultTo(0)
    table.integer('stars_total').notNullable().defaultTo(0)
    table.integer('version').notNullable().defaultTo(1)
    foreignKey(table, 'book', 'author_id', 'author', { notNull: true, onDelete: 'CASCADE' })
    // Only the database enforces these; the Flushwave schema has the same rules as .check/.range.
    table.check('?? >= 0', ['price'], 'book_price_check')
    table.check('?? >= 1', ['pages'], 'book_pages_check')
  })

  await knex.schema.createTable('review', (table) => {
    identityId(table, 'review')
    table.integer('stars').notNullable()
    table.text('body')
    table.text('reviewer')
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.raw('now()'))
    foreignKey(table, 'review', 'book_id', 'book', { notNull: true, onDelete: 'CASCADE' })
    table.check('?? between 1 and 5', ['stars'], 'review_stars_check')
  })

  await knex.schema.createTable('tag', (table) => {
    identityId(table, 'tag')
    table.text('name').notNullable().unique({ indexName: 'tag_name_key' })
  })

  // t.manyToMany('Tag', { table: 'book_tags' }): (book_id, tag_id), both cascading.
  await knex.schema.createTable('book_tags', (table) => {
    table.bigInteger('book_id').notNullable()
    table.bigInteger('tag_id').notNullable()
    table.foreign('book_id', 'book_tags_book_id_fkey').references('id').inTable('book').onDelete('CASCADE')
    table.foreign('tag_id', 'book_tags_tag_id_fkey').references('id').inTable('tag').onDelete('CASCADE')
    table.primary(['book_id', 'tag_id'], { constraintName: 'book_tags_pkey' })
    table.index(['tag_id'], 'book_tags_tag_id_idx')
  })
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['book_tags', 'tag', 'review', 'book', 'author']) await knex.schema.dropTableIfExists(table)
}
