import { defineSchema, entity, t, type Schema } from '../../src/index.js'
import type { Renames } from '../../src/catalog/diff.js'

/**
 * A schema through fourteen versions, each with the renames that lead to it from the one before:
 * tables and columns added, dropped and renamed, types changed, indexes, unique keys, checks, enum
 * values added and removed, foreign-key actions, nullability, defaults, a PostgreSQL schema of its
 * own, a many-to-many, a composite key and a generated column. Migration tests walk it.
 */
export const billing = `billing_${process.pid}`

const author = { id: t.id(), name: t.text() }
const book = { id: t.id(), title: t.text(), author: t.manyToOne('Author') }
const status = (values: readonly [string, ...string[]]) => t.enum('book_status', values)

/** Each version, and the renames that lead to it from the one before. */
export const versions: { schema: Schema; renames?: Renames; flags?: readonly string[]; what: string }[] = [
  { what: 'two tables', schema: defineSchema({ Author: entity('author', author), Book: entity('book', book) }) },
  {
    what: 'a column with a unique key, a nullable column',
    schema: defineSchema({ Author: entity('author', { ...author, email: t.text().nullable().unique() }), Book: entity('book', { ...book, pages: t.integer().nullable() }) }),
  },
  {
    what: 'a column renamed, an index',
    renames: { columns: new Map([['"book"', new Map([['title', 'heading']])]]) },
    flags: ['--rename', 'book.title=heading'],
    schema: defineSchema({
      Author: entity('author', { ...author, email: t.text().nullable().unique() }),
      Book: entity('book', { id: t.id(), heading: t.text().index(), author: t.manyToOne('Author'), pages: t.integer().nullable() }),
    }),
  },
  {
    what: 'types changed: wider, and narrower',
    schema: defineSchema({
      Author: entity('author', { id: t.id(), name: t.varchar(100), email: t.text().nullable().unique() }),
      Book: entity('book', { id: t.id(), heading: t.text().index(), author: t.manyToOne('Author'), pages: t.bigint().nullable() }),
    }),
  },
  {
    what: 'an enum column with a default, a check',
    schema: defineSchema({
      Author: entity('author', { id: t.id(), name: t.varchar(100), email: t.text().nullable().unique() }),
      Book: entity('book', { id: t.id(), heading: t.text().index(), author: t.manyToOne('Author'), pages: t.bigint().nullable().checkSql('pages >= 0'), status: status(['draft', 'published']).default('draft') }),
    }),
  },
  {
    what: 'an enum value between two, a foreign key action, not null, another default',
    schema: defineSchema({
      Author: entity('author', { id: t.id(), name: t.varchar(100), email: t.text().unique() }),
      Book: entity('book', {
        id: t.id(),
        heading: t.text().index(),
        author: t.manyToOne('Author').onDelete('cascade'),
        pages: t.bigint().nullable().checkSql('pages >= 0'),
        status: status(['draft', 'review', 'published']).default('published'),
      }),
    }),
  },
  {
    what: 'a table and a many-to-many',
    schema: defineSchema({
      Author: entity('author', { id: t.id(), name: t.varchar(100), email: t.text().unique() }),
      Book: entity('book', {
        id: t.id(),
        heading: t.text().index(),
        author: t.manyToOne('Author').onDelete('cascade'),
        pages: t.bigint().nullable().checkSql('pages >= 0'),
        status: status(['draft', 'review', 'published']).default('published'),
        tags: t.manyToMany('Tag'),
      }),
      Tag: entity('tag', { id: t.id(), name: t.text().unique() }),
    }),
  },
  {
    what: 'a table in a PostgreSQL schema of its own, referring to another',
    schema: defineSchema({
      Author: entity('author', { id: t.id(), name: t.varchar(100), email: t.text().unique() }),
      Book: entity('book', {
        id: t.id(),
        heading: t.text().index(),
        author: t.manyToOne('Author').onDelete('cascade'),
        pages: t.bigint().nullable().checkSql('pages >= 0'),
        status: status(['draft', 'review', 'published']).default('published'),
        tags: t.manyToMany('Tag'),
      }),
      Tag: entity('tag', { id: t.id(), name: t.text().unique() }),
      Invoice: entity('invoice', { id: t.id(), total: t.numeric().default('0'), author: t.manyToOne('Author') }, { schema: billing }),
    }),
  },
  {
    what: 'a table renamed, with its join table',
    renames: { tables: new Map([['"tag"', '"label"'], ['"book_tag"', '"book_label"']]), columns: new Map([['"book_label"', new Map([['tag_id', 'label_id']])]]) },
    flags: ['--rename', 'tag=label', '--rename', 'book_tag=book_label', '--rename', 'book_tag.tag_id=label_id'],
    schema: defineSchema({
      Author: entity('author', { id: t.id(), name: t.varchar(100), email: t.text().unique() }),
      Book: entity('book', {
        id: t.id(),
        heading: t.text().index(),
        author: t.manyToOne('Author').onDelete('cascade'),
        pages: t.bigint().nullable().checkSql('pages >= 0'),
        status: status(['draft', 'review', 'published']).default('published'),
        tags: t.manyToMany('Label'),
      }),
      Label: entity('label', { id: t.id(), name: t.text().unique() }),
      Invoice: entity('invoice', { id: t.id(), total: t.numeric().default('0'), author: t.manyToOne('Author') }, { schema: billing }),
    }),
  },
  {
    what: 'a column dropped, an index dropped, a partial index over two columns, a check over the row',
    schema: defineSchema({
      Author: entity('author', { id: t.id(), name: t.varchar(100) }),
      Book: entity(
        'book',
        {
          id: t.id(),
          heading: t.text(),
          author: t.manyToOne('Author').onDelete('cascade'),
          pages: t.bigint().nullable().checkSql('pages >= 0'),
          status: status(['draft', 'review', 'published']).default('published'),
          tags: t.manyToMany('Label'),
        },
        { indexes: [{ on: ['author', 'heading'], where: "status <> 'draft'" }], checks: { book_heading_short: 'length(heading) < 200' } },
      ),
      Label: entity('label', { id: t.id(), name: t.text().unique() }),
      Invoice: entity('invoice', { id: t.id(), total: t.numeric().default('0'), author: t.manyToOne('Author') }, { schema: billing }),
    }),
  },
  {
    what: 'a table and its PostgreSQL schema dropped, a composite-key table',
    schema: defineSchema({
      Author: entity('author', { id: t.id(), name: t.varchar(100) }),
      Book: entity(
        'book',
        {
          id: t.id(),
          heading: t.text(),
          author: t.manyToOne('Author').onDelete('cascade'),
          pages: t.bigint().nullable().checkSql('pages >= 0'),
          status: status(['draft', 'review', 'published']).default('published'),
          tags: t.manyToMany('Label'),
        },
        { indexes: [{ on: ['author', 'heading'], where: "status <> 'draft'" }], checks: { book_heading_short: 'length(heading) < 200' } },
      ),
      Label: entity('label', { id: t.id(), name: t.text().unique() }),
      Review: entity('review', { book: t.manyToOne('Book').onDelete('cascade'), author: t.manyToOne('Author'), stars: t.smallint(), deletedAt: t.timestamptz().nullable() }, { primaryKey: ['book', 'author'], softDelete: 'deletedAt' }),
    }),
  },
  {
    what: 'an enum value removed, a unique key over two columns, a nullable reference',
    schema: defineSchema({
      Author: entity('author', { id: t.id(), name: t.varchar(100) }),
      Book: entity(
        'book',
        {
          id: t.id(),
          heading: t.text(),
          author: t.manyToOne('Author').onDelete('cascade'),
          editor: t.manyToOne('Author').nullable().onDelete('set null'),
          pages: t.bigint().nullable().checkSql('pages >= 0'),
          status: status(['draft', 'published']).default('published'),
          tags: t.manyToMany('Label'),
        },
        { indexes: [{ on: ['author', 'heading'], where: "status <> 'draft'" }], checks: { book_heading_short: 'length(heading) < 200' }, unique: [['author', 'heading']] },
      ),
      Label: entity('label', { id: t.id(), name: t.text().unique() }),
      Review: entity('review', { book: t.manyToOne('Book').onDelete('cascade'), author: t.manyToOne('Author'), stars: t.smallint(), deletedAt: t.timestamptz().nullable() }, { primaryKey: ['book', 'author'], softDelete: 'deletedAt' }),
    }),
  },
  {
    what: 'a generated column, an identity dropped from a key the application now provides, a default dropped',
    schema: defineSchema({
      Author: entity('author', { id: t.providedId(), name: t.varchar(100), initial: t.text().generated('left(name, 1)') }),
      Book: entity(
        'book',
        {
          id: t.id(),
          heading: t.text(),
          author: t.manyToOne('Author').onDelete('cascade'),
          editor: t.manyToOne('Author').nullable().onDelete('set null'),
          pages: t.bigint().nullable().checkSql('pages >= 0'),
          status: status(['draft', 'published']),
          tags: t.manyToMany('Label'),
        },
        { indexes: [{ on: ['author', 'heading'], where: "status <> 'draft'" }], checks: { book_heading_short: 'length(heading) < 200' }, unique: [['author', 'heading']] },
      ),
      Label: entity('label', { id: t.id(), name: t.text().unique() }),
      Review: entity('review', { book: t.manyToOne('Book').onDelete('cascade'), author: t.manyToOne('Author'), stars: t.smallint(), deletedAt: t.timestamptz().nullable() }, { primaryKey: ['book', 'author'], softDelete: 'deletedAt' }),
    }),
  },
  {
    what: 'an enum value added and made the default in the same migration',
    schema: defineSchema({
      Author: entity('author', { id: t.providedId(), name: t.varchar(100), initial: t.text().generated('left(name, 1)') }),
      Book: entity(
        'book',
        {
          id: t.id(),
          heading: t.text(),
          author: t.manyToOne('Author').onDelete('cascade'),
          editor: t.manyToOne('Author').nullable().onDelete('set null'),
          pages: t.bigint().nullable().checkSql('pages >= 0'),
          status: status(['draft', 'published', 'archived']).default('archived'),
          tags: t.manyToMany('Label'),
        },
        { indexes: [{ on: ['author', 'heading'], where: "status <> 'draft'" }], checks: { book_heading_short: 'length(heading) < 200' }, unique: [['author', 'heading']] },
      ),
      Label: entity('label', { id: t.id(), name: t.text().unique() }),
      Review: entity('review', { book: t.manyToOne('Book').onDelete('cascade'), author: t.manyToOne('Author'), stars: t.smallint(), deletedAt: t.timestamptz().nullable() }, { primaryKey: ['book', 'author'], softDelete: 'deletedAt' }),
    }),
  },
]

