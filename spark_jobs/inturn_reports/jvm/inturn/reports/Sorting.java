package inturn.reports;

/** A stable merge sort of int indices by a comparator on them (no boxing). */
final class Sorting {
  private Sorting() {}

  interface IndexOrder {
    int compare(int a, int b);
  }

  /** Sorts {@code values[0, n)} by {@code order}; {@code scratch} must hold n values. */
  static void sort(int[] values, int n, int[] scratch, IndexOrder order) {
    if (n < 2) return;
    if (scratch.length < n) scratch = new int[n];
    for (int i = 0; i < n; i += 16) insertion(values, i, Math.min(i + 16, n), order);
    int[] from = values, to = scratch;
    for (int width = 16; width < n; width *= 2) {
      for (int lo = 0; lo < n; lo += 2 * width) {
        int mid = Math.min(lo + width, n), hi = Math.min(lo + 2 * width, n);
        int i = lo, j = mid, k = lo;
        while (i < mid && j < hi) to[k++] = order.compare(from[j], from[i]) < 0 ? from[j++] : from[i++];
        while (i < mid) to[k++] = from[i++];
        while (j < hi) to[k++] = from[j++];
      }
      int[] t = from; from = to; to = t;
    }
    if (from != values) System.arraycopy(from, 0, values, 0, n);
  }

  private static void insertion(int[] a, int lo, int hi, IndexOrder order) {
    for (int i = lo + 1; i < hi; i++) {
      int v = a[i];
      int j = i - 1;
      while (j >= lo && order.compare(v, a[j]) < 0) {
        a[j + 1] = a[j];
        j--;
      }
      a[j + 1] = v;
    }
  }
}
