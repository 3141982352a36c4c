// A CommonJS application: require() of the ESM package (Node's require(esm), 20.19 and later).
const { createTablesSql, defineSchema, entity, flushwave, t, FlushwaveError } = require('flushwave')
const postgres = require('postgres')

const schema = defineSchema({ Note: entity('note', { id: t.uuidId(), text: t.text() }) })
async function main() {
  const sql = postgres(process.env.DATABASE_URL, { max: 1, onnotice: () => {} })
  try {
    for (const statement of createTablesSql(schema)) await sql.unsafe(statement)
    const em = flushwave({ schema, sql }).em()
    const note = em.create('Note', { text: 'from CommonJS' })
    await em.flush()
    const [row] = await sql`select text from note where id = ${note.id}`
    if (row.text !== 'from CommonJS' || !(new FlushwaveError('x') instanceof Error)) throw new Error('unexpected')
    console.log('consumer.cjs: required, flushed and read back')
  } finally {
    await sql.end()
  }
}
main().catch((error) => {
  console.error(error)
  process.exit(1)
})
