import { asText, type ColumnType } from './column-type.js'

/** An address's bytes (4 or 16) and its prefix length, or why the text is no address. */
type Parsed = { readonly bytes: number[]; readonly prefix: number } | string

function ipv4(text: string): number[] | undefined {
  const parts = text.split('.')
  if (parts.length !== 4) return undefined
  const bytes = parts.map((p) => (/^(0|[1-9]\d{0,2})$/.test(p) ? Number(p) : NaN))
  return bytes.every((b) => b <= 255) ? bytes : undefined
}

function ipv6(text: string): number[] | undefined {
  const halves = text.split('::')
  if (halves.length > 2) return undefined
  const groups = (half: string): number[] | undefined => {
    if (half === '') return []
    const out: number[] = []
    const parts = half.split(':')
    for (let i = 0; i < parts.length; i++) {
      const p = parts[i]!
      if (i === parts.length - 1 && p.includes('.')) {
        const v4 = ipv4(p)
        if (!v4) return undefined
        out.push(...v4)
      } else {
        if (!/^[0-9a-fA-F]{1,4}$/.test(p)) return undefined
        const n = parseInt(p, 16)
        out.push(n >> 8, n & 255)
      }
    }
    return out
  }
  const head = groups(halves[0]!)
  const tail = halves.length === 2 ? groups(halves[1]!) : []
  if (!head || !tail) return undefined
  if (halves.length === 1) return head.length === 16 ? head : undefined
  // '::' stands for at least one group of zeros.
  if (head.length + tail.length > 14) return undefined
  return [...head, ...new Array<number>(16 - head.length - tail.length).fill(0), ...tail]
}

function parse(text: string): Parsed {
  const slash = text.indexOf('/')
  const address = slash < 0 ? text : text.slice(0, slash)
  const bytes = address.includes(':') ? ipv6(address) : ipv4(address)
  if (!bytes) return 'expected an IPv4 or IPv6 address, optionally with /prefix'
  const bits = bytes.length * 8
  if (slash < 0) return { bytes, prefix: bits }
  const prefix = text.slice(slash + 1)
  if (!/^(0|[1-9]\d{0,2})$/.test(prefix) || Number(prefix) > bits) return `expected a prefix length from 0 to ${bits}`
  return { bytes, prefix: Number(prefix) }
}

/** Whether bits of the address right of its prefix are set (a cidr refuses them). */
function hostBitsSet({ bytes, prefix }: { bytes: number[]; prefix: number }): boolean {
  for (let i = 0; i < bytes.length; i++) {
    const keep = Math.max(0, Math.min(8, prefix - i * 8))
    if ((bytes[i]! & (0xff >> keep)) !== 0) return true
  }
  return false
}

/**
 * An IPv4 address with an optional prefix, read without allocating: 1 when valid with no host bit
 * set right of the prefix, 2 when valid with one set, 0 when not this simple form (parse decides).
 */
function quickIpv4(s: string): 0 | 1 | 2 {
  let i = 0
  let address = 0
  for (let part = 0; part < 4; part++) {
    if (part > 0) {
      if (s.charCodeAt(i) !== 46 /* . */) return 0
      i++
    }
    const start = i
    let n = 0
    while (i < s.length && i - start < 4) {
      const c = s.charCodeAt(i) - 48
      if (c < 0 || c > 9) break
      n = n * 10 + c
      i++
    }
    const digits = i - start
    if (digits === 0 || digits > 3 || n > 255 || (digits > 1 && s.charCodeAt(start) === 48)) return 0
    address = address * 256 + n
  }
  if (i === s.length) return 1
  if (s.charCodeAt(i) !== 47 /* / */) return 0
  const start = ++i
  let prefix = 0
  while (i < s.length) {
    const c = s.charCodeAt(i) - 48
    if (c < 0 || c > 9) return 0
    prefix = prefix * 10 + c
    i++
  }
  const digits = i - start
  if (digits === 0 || digits > 2 || prefix > 32 || (digits > 1 && s.charCodeAt(start) === 48)) return 0
  return prefix === 32 || address % 2 ** (32 - prefix) === 0 ? 1 : 2
}

function networkType(sqlType: 'inet' | 'cidr'): ColumnType<string> {
  return {
    sqlType,
    operators: 'ordered',
    check: (v) => {
      if (typeof v !== 'string') return 'expected an IP address string'
      const quick = quickIpv4(v)
      if (quick === 1 || (quick === 2 && sqlType === 'inet')) return undefined
      const parsed = parse(v)
      if (typeof parsed === 'string') return parsed
      if (sqlType === 'cidr' && hostBitsSet(parsed)) return 'a cidr network has no bits set right of its prefix (use inet for a host)'
      return undefined
    },
    toText: (v) => v,
    fromDb: (raw) => String(raw),
    // inet as its output function writes it (a cast to text would add /32 to every host); cidr's text is its output.
    selectExpr: sqlType === 'inet' ? (c) => `abbrev(${c})` : asText,
  }
}

/**
 * inet: an IPv4 or IPv6 host address, optionally with its network's prefix (`'10.1.2.3/16'`). Read
 * back as the server writes it: `/32` (`/128`) left out, IPv6 in its shortest form.
 */
export const inet = networkType('inet')
/** cidr: an IPv4 or IPv6 network (`'10.1.0.0/16'`); bits right of the prefix are refused before sending. */
export const cidr = networkType('cidr')
