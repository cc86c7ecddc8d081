const encoder = new TextEncoder()

async function sha256(text: string): Promise<ArrayBuffer> {
  return crypto.subtle.digest('SHA-256', encoder.encode(text))
}

/** Hex sha256 of a string's UTF-8 bytes. */
export async function sha256Hex(text: string): Promise<string> {
  return [...new Uint8Array(await sha256(text))].map((byte) => byte.toString(16).padStart(2, '0')).join('')
}

/**
 * Which of `count` shards `key` belongs to: the first four bytes of its
 * sha256, modulo the count. The same key gives the same shard in every isolate
 * and every deploy; one shard needs no hashing. (The modulo's bias, under
 * 2^-28 for 16 shards, is nothing a load spread notices.)
 */
export async function shardOf(key: string, count: number): Promise<number> {
  if (count <= 1) return 0
  return new DataView(await sha256(key)).getUint32(0) % count
}

/**
 * Compares two secrets in constant time. Both are hashed first, so neither
 * their contents nor their lengths leak through timing.
 */
export async function secretsEqual(given: string, expected: string): Promise<boolean> {
  const [a, b] = await Promise.all([sha256(given), sha256(expected)])
  return crypto.subtle.timingSafeEqual(a, b)
}
