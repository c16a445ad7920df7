package inturn.reports;

import java.util.Arrays;

/** The distinct keys of two longs seen, numbered 0, 1, ... in the order first seen (open addressing). */
final class KeyIndex {
  private long[] a = new long[1 << 10], b = new long[1 << 10];
  private int[] slots = new int[1 << 11]; // a key's number + 1; 0 for an empty slot
  private int size;

  int size() {
    return size;
  }

  long first(int key) {
    return a[key];
  }

  long second(int key) {
    return b[key];
  }

  /** The number of the key (x, y), numbering it if it is new. */
  int index(long x, long y) {
    int mask = slots.length - 1;
    int slot = mix(x, y) & mask;
    while (true) {
      int at = slots[slot];
      if (at == 0) break;
      if (a[at - 1] == x && b[at - 1] == y) return at - 1;
      slot = (slot + 1) & mask;
    }
    if (size == a.length) {
      a = Arrays.copyOf(a, size * 2);
      b = Arrays.copyOf(b, size * 2);
    }
    a[size] = x;
    b[size] = y;
    slots[slot] = ++size;
    if (size * 2 > slots.length) rehash();
    return size - 1;
  }

  private void rehash() {
    slots = new int[slots.length * 2];
    int mask = slots.length - 1;
    for (int key = 0; key < size; key++) {
      int slot = mix(a[key], b[key]) & mask;
      while (slots[slot] != 0) slot = (slot + 1) & mask;
      slots[slot] = key + 1;
    }
  }

  /** A 64-bit finalizer (MurmurHash3's) over both values, so that nearby keys spread over the table. */
  private static int mix(long x, long y) {
    long h = x * 0x9E3779B97F4A7C15L ^ y;
    h ^= h >>> 33;
    h *= 0xff51afd7ed558ccdL;
    h ^= h >>> 33;
    h *= 0xc4ceb9fe1a85ec53L;
    h ^= h >>> 33;
    return (int) h;
  }
}
