/** Adds `value` to the list `groups` holds under `key`, starting the list on first use. */
export function addTo<K, V>(groups: Map<K, V[]>, key: K, value: V): void {
  const list = groups.get(key)
  if (list) list.push(value)
  else groups.set(key, [value])
}
