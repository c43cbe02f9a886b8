/**
 * A bounded map that evicts the least recently used entry: a `Map` keeps
 * insertion order, so a hit re-inserts its entry at the end and eviction
 * takes the first.
 */
export class Lru<K, V> {
  private readonly map = new Map<K, V>();
  private readonly max: number;

  constructor(max: number) {
    this.max = max;
  }

  get size(): number {
    return this.map.size;
  }

  get(key: K): V | undefined {
    const value = this.map.get(key);
    if (value !== undefined) {
      this.map.delete(key);
      this.map.set(key, value);
    }
    return value;
  }

  set(key: K, value: V): void {
    this.map.delete(key);
    if (this.map.size >= this.max) this.map.delete(this.map.keys().next().value as K);
    this.map.set(key, value);
  }

  delete(key: K): void {
    this.map.delete(key);
  }

  values(): IterableIterator<V> {
    return this.map.values();
  }

  entries(): IterableIterator<[K, V]> {
    return this.map.entries();
  }
}
