import { rawCopySeries } from './raw.js'

export const series = rawCopySeries
