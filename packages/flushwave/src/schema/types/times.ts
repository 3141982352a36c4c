import { isoTime } from '../iso-time.js'
import { asText, type ColumnType, type Wire } from './column-type.js'

/** What toISOString() writes in a form PostgreSQL reads: years 1 to 9999 (others get a sign and six digits). */
const TIMESTAMP_MIN = Date.parse('0001-01-01T00:00:00.000Z')
const TIMESTAMP_MAX = Date.parse('9999-12-31T23:59:59.999Z')

/**
 * A Date's text by its time, remembering the last one: entities created together mostly share a
 * millisecond. Takes the time alone as well (see ColumnType.fromTime).
 */
function lastFormatted(format: (time: number) => string): (date: Date | number) => string {
  let lastTime = NaN
  let lastText = ''
  return (date) => {
    const time = typeof date === 'number' ? date : date.getTime()
    if (time !== lastTime) {
      lastText = format(time)
      lastTime = time
    }
    return lastText
  }
}

/** toISOString() is exact to the millisecond, and PostgreSQL reads it over years 1 to 9999 (TIMESTAMP_MAX). */
const isoText = lastFormatted((time) => new Date(time).toISOString())

/** The time of a value read: epoch milliseconds (selectExpr's), or ISO 8601 text (a page cursor's, toText's). */
function timeOf(raw: unknown): number {
  if (typeof raw === 'number') return raw
  const text = String(raw)
  const ms = Number(text)
  // Infinity ('infinity' read) stays what it was as a Date: an invalid one.
  return Number.isNaN(ms) || text === '' ? isoTime(text) : Number.isFinite(ms) ? ms : NaN
}

/**
 * A time type held as a Date: timestamptz, and timestamp without time zone read as if it were UTC
 * (its Date's UTC fields are the wall-clock time stored, so no time zone or DST shift can touch it).
 * Values travel as epoch milliseconds in int8 arrays, which PostgreSQL reads much faster than date
 * text. Whole seconds and the remaining milliseconds are added as separate intervals: multiplying
 * one interval by the whole count goes through float8 and would lose microseconds near year 9999.
 */
function dateType(sqlType: 'timestamptz' | 'timestamp'): ColumnType<Date> {
  const wire: Wire<Date> = {
    sqlType: 'int8',
    encode: lastFormatted((time) => String(time)),
    decode: (x) => `(${sqlType} 'epoch' + (${x} / 1000) * interval '1 second' + (${x} % 1000) * interval '1 millisecond')`,
    toText: (encoded) => isoText(Number(encoded)),
  }
  return {
    sqlType,
    operators: 'ordered',
    mutable: true,
    check: (v) => {
      if (!(v instanceof Date) || Number.isNaN(v.getTime())) return 'expected a valid Date'
      const time = v.getTime()
      return time >= TIMESTAMP_MIN && time <= TIMESTAMP_MAX ? undefined : 'expected a Date from year 1 to 9999 (UTC)'
    },
    // For timestamp without time zone the server ignores the Z: the UTC fields are what it stores.
    toText: isoText,
    fromDb: (raw) => (raw instanceof Date ? raw : new Date(timeOf(raw))),
    fromTime: (ms) => new Date(ms),
    timeFromDb: (raw) => (raw instanceof Date ? raw.getTime() : timeOf(raw)),
    wire,
    // Epoch milliseconds, exact (extract gives numeric since PostgreSQL 14) and whatever the
    // session's DateStyle and TimeZone: for the server a fraction of the cost of formatting the time
    // as text (to_json), and for the client a number to read, not a date to parse. For timestamp
    // without time zone, extract counts from 1970-01-01 00:00 of the same wall clock.
    selectExpr: (c) => `floor(extract(epoch from ${c}) * 1000)`,
  }
}

export const timestamptz = dateType('timestamptz')
export const timestamp = dateType('timestamp')

const DATE = /^(\d{4})-(\d{2})-(\d{2})( BC)?$/

/** Days in `month` of the proleptic Gregorian calendar, for an astronomical year (1 BC is 0). */
function daysIn(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31
}

/** The calendar date `days` after 1970-01-01 as PostgreSQL writes it in ISO style (H. Hinnant's civil_from_days). */
export function dateFromDays(days: number): string {
  const z = days + 719_468
  const era = Math.floor(z / 146_097)
  const dayOfEra = z - era * 146_097
  const yearOfEra = Math.floor((dayOfEra - Math.floor(dayOfEra / 1460) + Math.floor(dayOfEra / 36_524) - Math.floor(dayOfEra / 146_096)) / 365)
  const dayOfYear = dayOfEra - (365 * yearOfEra + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100))
  const mp = Math.floor((5 * dayOfYear + 2) / 153)
  const day = dayOfYear - Math.floor((153 * mp + 2) / 5) + 1
  const month = mp < 10 ? mp + 3 : mp - 9
  const year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
  const pad = (n: number, width: number) => String(n).padStart(width, '0')
  return year > 0 ? `${pad(year, 4)}-${pad(month, 2)}-${pad(day, 2)}` : `${pad(1 - year, 4)}-${pad(month, 2)}-${pad(day, 2)} BC`
}

/**
 * date: a calendar date as `'YYYY-MM-DD'` text (`' BC'` after it before year 1; `'infinity'` and
 * `'-infinity'` too), so that no time zone can move it. Read as days since 1970, whatever the
 * session's DateStyle.
 */
export const date: ColumnType<string> = {
  sqlType: 'date',
  operators: 'ordered',
  check: (v) => {
    if (typeof v !== 'string') return "expected a 'YYYY-MM-DD' string"
    if (v === 'infinity' || v === '-infinity') return undefined
    const m = DATE.exec(v)
    if (!m) return "expected a 'YYYY-MM-DD' string"
    const year = m[4] ? 1 - Number(m[1]) : Number(m[1])
    const month = Number(m[2])
    const day = Number(m[3])
    if (m[1] === '0000') return 'there is no year 0 (1 BC is 0001-… BC)'
    if (m[4] && year < -4712) return 'PostgreSQL dates start in 4713 BC'
    if (month < 1 || month > 12 || day < 1 || day > daysIn(year, month)) return `no such date: ${v}`
    return undefined
  },
  toText: (v) => v,
  fromDb: (raw) => {
    const text = String(raw)
    return /^-?\d+$/.test(text) ? dateFromDays(Number(text)) : text
  },
  selectExpr: (c) => `case when isfinite(${c}) then (${c} - date '1970-01-01')::text else ${c}::text end`,
}

const TIME = /^(\d{2}):(\d{2})(?::(\d{2})(\.\d{1,6})?)?$/

/**
 * time (without time zone): `'HH:MM:SS'` text with up to six digits of fraction, from 00:00 to
 * 24:00:00. Read back as the server writes it (`'10:00'` reads `'10:00:00'`, `.50` reads `.5`).
 */
export const time: ColumnType<string> = {
  sqlType: 'time',
  operators: 'ordered',
  check: (v) => {
    if (typeof v !== 'string') return "expected an 'HH:MM:SS' string"
    const m = TIME.exec(v)
    if (!m) return "expected an 'HH:MM:SS' string (at most 6 digits of fraction)"
    const [h, min, s] = [Number(m[1]), Number(m[2]), Number(m[3] ?? 0)]
    if (h === 24 && min === 0 && s === 0 && !/[1-9]/.test(m[4] ?? '')) return undefined
    return h < 24 && min < 60 && s < 60 ? undefined : `no such time of day: ${v}`
  },
  toText: (v) => v,
  fromDb: (raw) => String(raw),
  selectExpr: asText,
}

const UNIT = '(?:microseconds?|us|usecs?|milliseconds?|ms|msecs?|seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h|days?|d|weeks?|w|months?|mons?|years?|yrs?|y|decades?|decs?|centur(?:y|ies)|c|millenni(?:um|a)|mils?)'
const NUMBER = '[+-]?(?:\\d+(?:\\.\\d*)?|\\.\\d+)'
const CLOCK = '[+-]?\\d+:\\d{1,2}(?::\\d{1,2}(?:\\.\\d+)?)?'
/** PostgreSQL's own interval syntax: `1 year 2 mons -3 days 04:05:06.7`, `@ 3 days ago`, `90` (seconds). */
const VERBOSE = new RegExp(`^@?\\s*(?:${NUMBER}\\s*${UNIT}\\b\\s*)*(?:${CLOCK}|${NUMBER})?\\s*(?:ago)?\\s*$`, 'i')
const ISO_PART = '[+-]?\\d+(?:[.,]\\d+)?'
/** ISO 8601 durations: `P1Y2M3DT4H5M6.7S`, `P2W`. */
const ISO = new RegExp(`^P(?:${ISO_PART}Y)?(?:${ISO_PART}M)?(?:${ISO_PART}W)?(?:${ISO_PART}D)?(?:T(?:${ISO_PART}H)?(?:${ISO_PART}M)?(?:${ISO_PART}S)?)?$`)

/**
 * interval: text in PostgreSQL's syntax or ISO 8601, checked before sending. Read back as the server
 * writes it (IntervalStyle postgres, the default: `'P1Y2M'` reads `'1 year 2 mons'`).
 */
export const interval: ColumnType<string> = {
  sqlType: 'interval',
  operators: 'ordered',
  check: (v) => {
    if (typeof v !== 'string') return 'expected an interval string'
    const s = v.trim()
    if (s === '' || s === '@' || /^@?\s*ago$/i.test(s) || !(VERBOSE.test(s) || (ISO.test(s) && s !== 'P' && !s.endsWith('T')))) {
      return "expected an interval such as '1 day 02:00:00' or 'P1DT2H'"
    }
    return undefined
  },
  toText: (v) => v,
  fromDb: (raw) => String(raw),
  selectExpr: asText,
}
