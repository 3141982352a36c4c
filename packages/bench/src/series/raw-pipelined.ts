import { rawSeries } from './raw.js'

export const series = rawSeries('raw-pipelined', 'pipelined')
