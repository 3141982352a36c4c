import type { ColumnType } from './column-type.js'

/** Node's Buffer when there is one (not in a browser build): hex in native code. */
const NodeBuffer = (globalThis as { Buffer?: typeof Buffer }).Buffer

function toHex(bytes: Uint8Array): string {
  if (NodeBuffer) return NodeBuffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex')
  let out = ''
  for (let i = 0; i < bytes.length; i++) out += (bytes[i]! < 16 ? '0' : '') + bytes[i]!.toString(16)
  return out
}

function fromHex(hex: string): Uint8Array {
  if (NodeBuffer) {
    const b = NodeBuffer.from(hex, 'hex')
    return new Uint8Array(b.buffer, b.byteOffset, b.byteLength)
  }
  const out = new Uint8Array(hex.length >> 1)
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.substr(i * 2, 2), 16)
  return out
}

/**
 * bytea: a Uint8Array (a Buffer is one). Sent in hex input form, read as hex whatever the session's
 * bytea_output; a read gives a Uint8Array. Changing its bytes in place is a change the next flush writes.
 */
export const bytea: ColumnType<Uint8Array> = {
  sqlType: 'bytea',
  operators: 'equality',
  mutable: true,
  check: (v) => (v instanceof Uint8Array ? undefined : 'expected a Uint8Array (or a Buffer)'),
  toText: (v) => '\\x' + toHex(v),
  fromDb: (raw) => {
    if (raw instanceof Uint8Array) return raw
    const text = String(raw)
    return fromHex(text.startsWith('\\x') ? text.slice(2) : text)
  },
  selectExpr: (c) => `encode(${c}, 'hex')`,
  // Hex digits alone in the write statements' text arrays: no backslash to escape there.
  wire: { sqlType: 'text', encode: toHex, decode: (x) => `decode(${x}, 'hex')`, toText: (encoded) => '\\x' + encoded },
}
