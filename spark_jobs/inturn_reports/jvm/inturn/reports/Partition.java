package inturn.reports;

import static inturn.reports.RoomPass.NULL;
import static inturn.reports.RoomPass.NULL_INT;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.List;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeArrayData;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.array.ByteArrayMethods;
import org.apache.spark.unsafe.types.UTF8String;

/** One task of {@link RoomPass}: its partition's rows copied into columns, then one room at a time. */
final class Partition {
  private static final long DAY_MS = 86_400_000L;

  private final RoomPass.Params p;
  private final RoomPass.Masks m;
  private final int[] o;

  // The partition's rows, one array per column (NULL / NULL_INT for null; -1 for a null string's position).
  private int n;
  private int[] room, flags, mode, part, platform, msgAt, msgLen, pmidAt, pmidLen;
  /** Each message id's and platform message id's hash: rows are sorted by it first, then by the bytes. */
  private int[] msgHash, pmidHash;
  private long[] offset, created, t1, t2, t3;
  /** The bytes of every row's message id and platform message id. */
  private byte[] arena;
  private int arenaUsed;

  /** The rooms seen, in the order first seen (null: a null room id), and an open-addressing index of them. */
  private final ArrayList<UTF8String> rooms = new ArrayList<>();
  private int[] roomSlots = new int[1 << 12];
  private int nullRoom = -1;
  private final ArrayList<UTF8String> platforms = new ArrayList<>();

  // Per room, reused: its rows by kind, the acks known by platform message id combined per id, its messages.
  private int[] ids = new int[64], pmidRows = new int[64], msgRows = new int[64];
  private int[] gRow = new int[64], gFlags = new int[64];
  private long[] g1 = new long[64], g2 = new long[64], g3 = new long[64];
  private Messages msgs = new Messages(64);
  private int[] order = new int[64];

  private final List<InternalRow> out = new ArrayList<>();
  /** The cells (key: ``group(date, platform, mode, -1)`` and the bucket's start) and their counts. */
  private final KeyIndex cells = new KeyIndex();
  private final ArrayList<long[]> cellCounts = new ArrayList<>();
  /** The latency values (key: ``group(date, platform, mode, measure)`` and the value) and their counts. */
  private final KeyIndex latencies = new KeyIndex();
  private long[] latencyCounts = new long[1 << 10];

  /** The most rows and string bytes a task of this JVM held: the next one starts with that much room, instead of
   * growing its columns from small (each growth a copy, and garbage for the collector). */
  private static volatile int lastRows = 1 << 14, lastBytes = 1 << 18;

  Partition(RoomPass.Params p) {
    this.p = p;
    this.m = p.masks;
    this.o = p.ordinals;
    allocate(lastRows + (lastRows >> 3));
    arena = new byte[lastBytes + (lastBytes >> 3)];
  }

  private void allocate(int size) {
    room = new int[size]; flags = new int[size]; mode = new int[size]; part = new int[size];
    platform = new int[size]; msgAt = new int[size]; msgLen = new int[size]; pmidAt = new int[size];
    pmidLen = new int[size]; msgHash = new int[size]; pmidHash = new int[size];
    offset = new long[size]; created = new long[size]; t1 = new long[size]; t2 = new long[size]; t3 = new long[size];
  }

  /** A cell's or latency value's group as one long: day, platform code, mode key and measure (-1 for a cell). */
  private static long group(int date, int platform, int mode, int measure) {
    return ((long) date << 32) | ((platform & 0xffffL) << 16) | ((mode & 0xffL) << 8) | (measure & 0xffL);
  }

  Iterator<InternalRow> run(Iterator<InternalRow> input) {
    while (input.hasNext()) copy(input.next());
    lastRows = Math.max(lastRows, n);
    lastBytes = Math.max(lastBytes, arenaUsed);
    inRoomOrder(groupedByRoom());
    int[] start = new int[rooms.size() + 1];
    for (int i = 0; i < n; i++) start[room[i] + 1]++;
    for (int r = 0; r < rooms.size(); r++) start[r + 1] += start[r];
    for (int r = 0; r < rooms.size(); r++) room(r, start[r], start[r + 1]);
    for (int k = 0; k < cells.size(); k++) {
      long group = cells.first(k);
      out.add(countRow(RoomPass.CELL, group, cells.second(k), cellCounts.get(k), null));
    }
    // One row per latency group: its distinct values and how many messages had each, as two arrays.
    LinkedHashMap<Long, Values> groups = new LinkedHashMap<>();
    for (int k = 0; k < latencies.size(); k++) {
      groups.computeIfAbsent(latencies.first(k), g -> new Values()).add(latencies.second(k), latencyCounts[k]);
    }
    for (Map.Entry<Long, Values> e : groups.entrySet()) {
      Values v = e.getValue();
      long group = e.getKey();
      out.add(countRow(RoomPass.LATENCY, group, group & 0xff, Arrays.copyOf(v.counts, v.size),
          Arrays.copyOf(v.values, v.size)));
    }
    return out.iterator();
  }

  /** A latency group's distinct values and their counts, as they are added. */
  private static final class Values {
    long[] values = new long[64], counts = new long[64];
    int size;

    void add(long value, long count) {
      if (size == values.length) {
        values = Arrays.copyOf(values, size * 2);
        counts = Arrays.copyOf(counts, size * 2);
      }
      values[size] = value;
      counts[size++] = count;
    }
  }

  // ---- copying --------------------------------------------------------------------------------------------

  private void copy(InternalRow r) {
    if (n == room.length) grow();
    room[n] = r.isNullAt(o[RoomPass.Columns.ROOM_ID]) ? nullRoom() : roomOf(r.getUTF8String(o[RoomPass.Columns.ROOM_ID]));
    flags[n] = r.isNullAt(o[RoomPass.Columns.FLAGS]) ? 0 : r.getInt(o[RoomPass.Columns.FLAGS]);
    mode[n] = intAt(r, RoomPass.Columns.MODE);
    part[n] = intAt(r, RoomPass.Columns.PARTITION);
    platform[n] = r.isNullAt(o[RoomPass.Columns.PLATFORM]) ? -1 : platformOf(r.getUTF8String(o[RoomPass.Columns.PLATFORM]));
    offset[n] = longAt(r, RoomPass.Columns.OFFSET);
    created[n] = longAt(r, RoomPass.Columns.CREATED);
    t1[n] = longAt(r, RoomPass.Columns.T1);
    t2[n] = longAt(r, RoomPass.Columns.T2);
    t3[n] = longAt(r, RoomPass.Columns.T3);
    copyId(r, RoomPass.Columns.MESSAGE_ID, msgAt, msgLen, msgHash);
    copyId(r, RoomPass.Columns.PMID, pmidAt, pmidLen, pmidHash);
    n++;
  }

  /** Row {@code n}'s string in {@code column} into the arena: where, how long (-1 for null) and its hash. */
  private void copyId(InternalRow r, int column, int[] at, int[] len, int[] hash) {
    if (r.isNullAt(o[column])) {
      len[n] = -1;
      return;
    }
    UTF8String s = r.getUTF8String(o[column]);
    at[n] = store(s);
    len[n] = s.numBytes();
    hash[n] = s.hashCode();
  }

  private int intAt(InternalRow r, int column) {
    return r.isNullAt(o[column]) ? NULL_INT : r.getInt(o[column]);
  }

  private long longAt(InternalRow r, int column) {
    return r.isNullAt(o[column]) ? NULL : r.getLong(o[column]);
  }

  private int store(UTF8String s) {
    int size = s.numBytes();
    if (arenaUsed + size > arena.length) arena = Arrays.copyOf(arena, Math.max(arena.length * 2, arenaUsed + size));
    int at = arenaUsed;
    s.writeToMemory(arena, Platform.BYTE_ARRAY_OFFSET + at);
    arenaUsed += size;
    return at;
  }

  private void grow() {
    int size = room.length * 2;
    room = Arrays.copyOf(room, size); flags = Arrays.copyOf(flags, size); mode = Arrays.copyOf(mode, size);
    part = Arrays.copyOf(part, size); platform = Arrays.copyOf(platform, size);
    offset = Arrays.copyOf(offset, size); created = Arrays.copyOf(created, size); t1 = Arrays.copyOf(t1, size);
    t2 = Arrays.copyOf(t2, size); t3 = Arrays.copyOf(t3, size);
    msgAt = Arrays.copyOf(msgAt, size); msgLen = Arrays.copyOf(msgLen, size);
    pmidAt = Arrays.copyOf(pmidAt, size); pmidLen = Arrays.copyOf(pmidLen, size);
    msgHash = Arrays.copyOf(msgHash, size); pmidHash = Arrays.copyOf(pmidHash, size);
  }

  private int nullRoom() {
    if (nullRoom < 0) {
      nullRoom = rooms.size();
      rooms.add(null);
    }
    return nullRoom;
  }

  private int roomOf(UTF8String s) {
    int mask = roomSlots.length - 1;
    int slot = s.hashCode() & mask;
    while (true) {
      int at = roomSlots[slot];
      if (at == 0) break;
      if (s.equals(rooms.get(at - 1))) return at - 1;
      slot = (slot + 1) & mask;
    }
    rooms.add(s.clone());
    roomSlots[slot] = rooms.size();
    if (rooms.size() * 2 > roomSlots.length) rehashRooms();
    return rooms.size() - 1;
  }

  private void rehashRooms() {
    int[] slots = new int[roomSlots.length * 2];
    int mask = slots.length - 1;
    for (int i = 0; i < rooms.size(); i++) {
      UTF8String s = rooms.get(i);
      if (s == null) continue;
      int slot = s.hashCode() & mask;
      while (slots[slot] != 0) slot = (slot + 1) & mask;
      slots[slot] = i + 1;
    }
    roomSlots = slots;
  }

  private int platformOf(UTF8String s) {
    for (int i = 0; i < platforms.size(); i++) if (s.equals(platforms.get(i))) return i;
    if (platforms.size() == 0xffff) { // a code is 16 bits of a group key, and 0xffff is a null platform's
      throw new IllegalStateException("more than 65,535 distinct platform names in one partition of the report");
    }
    platforms.add(s.clone());
    return platforms.size() - 1;
  }

  /** The row indices grouped by room (a counting sort: rooms in the order first seen, rows in input order). */
  private int[] groupedByRoom() {
    int[] next = new int[rooms.size() + 1];
    for (int i = 0; i < n; i++) next[room[i] + 1]++;
    for (int r = 0; r < rooms.size(); r++) next[r + 1] += next[r];
    int[] grouped = new int[n];
    for (int i = 0; i < n; i++) grouped[next[room[i]]++] = i;
    return grouped;
  }

  /** Puts the rows in the order of {@code byRoom}, so that each room's rows are next to each other in every column
   * (the work on a room then reads memory in order, not all over the partition). */
  private void inRoomOrder(int[] byRoom) {
    int[] ints = new int[n];
    for (int[] column : new int[][] {room, flags, mode, part, platform, msgAt, msgLen, msgHash, pmidAt, pmidLen,
        pmidHash}) {
      for (int i = 0; i < n; i++) ints[i] = column[byRoom[i]];
      System.arraycopy(ints, 0, column, 0, n);
    }
    long[] longs = new long[n];
    for (long[] column : new long[][] {offset, created, t1, t2, t3}) {
      for (int i = 0; i < n; i++) longs[i] = column[byRoom[i]];
      System.arraycopy(longs, 0, column, 0, n);
    }
  }

  // ---- one room -------------------------------------------------------------------------------------------

  /** Compares the strings at {@code a} and {@code b} of the arena (lengths -1 for null: nulls first) as Spark
   * compares strings (unsigned bytes). */
  private int compareBytes(int aAt, int aLen, int bAt, int bLen) {
    if (aLen < 0 || bLen < 0) return Integer.compare(aLen < 0 ? 0 : 1, bLen < 0 ? 0 : 1);
    int len = Math.min(aLen, bLen);
    for (int i = 0; i < len; i++) {
      int c = (arena[aAt + i] & 0xff) - (arena[bAt + i] & 0xff);
      if (c != 0) return c;
    }
    return aLen - bLen;
  }

  /** An order of strings of the arena that only groups equal ones (by hash, length, then bytes; nulls first):
   * equal strings compare as one word at a time, and only strings whose hash and length agree compare bytes. */
  private int compareGrouping(int aHash, int aAt, int aLen, int bHash, int bAt, int bLen) {
    if (aLen < 0 || bLen < 0) return Integer.compare(aLen < 0 ? 0 : 1, bLen < 0 ? 0 : 1);
    int c = aHash != bHash ? Integer.compare(aHash, bHash) : Integer.compare(aLen, bLen);
    if (c != 0) return c;
    long offset = Platform.BYTE_ARRAY_OFFSET;
    if (ByteArrayMethods.arrayEquals(arena, offset + aAt, arena, offset + bAt, aLen)) return 0;
    return compareBytes(aAt, aLen, bAt, bLen);
  }

  /** An order of the rows by platform message id that puts equal ids next to each other. */
  private int comparePmid(int a, int b) {
    return compareGrouping(pmidHash[a], pmidAt[a], pmidLen[a], pmidHash[b], pmidAt[b], pmidLen[b]);
  }

  /** An order of the rows by message (id, then platform) that puts each message's rows next to each other. */
  private int compareMessage(int a, int b) {
    int c = compareGrouping(msgHash[a], msgAt[a], msgLen[a], msgHash[b], msgAt[b], msgLen[b]);
    return c != 0 ? c : Integer.compare(platform[a], platform[b]);
  }

  private final Sorting.IndexOrder byMessage = this::compareMessage, byPmid = this::comparePmid;

  private void room(int r, int from, int to) {
    int size = to - from;
    if (pmidRows.length < size) {
      pmidRows = new int[size * 2]; msgRows = new int[size * 2]; ids = new int[size * 2];
      gRow = new int[size * 2]; gFlags = new int[size * 2];
      g1 = new long[size * 2]; g2 = new long[size * 2]; g3 = new long[size * 2];
    }
    int np = 0, nm = 0;
    for (int i = from; i < to; i++) {
      int row = i;
      if ((flags[row] & m.ackRow) != 0 && msgLen[row] < 0) {
        if (pmidLen[row] >= 0) pmidRows[np++] = row; // an ack naming neither message nor platform id matches none
      } else {
        msgRows[nm++] = row;
      }
    }
    int groups = pmidGroups(np);
    Sorting.sort(msgRows, nm, ids, byMessage);
    int messages = 0;
    msgs.ensure(nm);
    for (int i = 0; i < nm; ) {
      int j = i + 1;
      while (j < nm && compareMessage(msgRows[i], msgRows[j]) == 0) j++;
      if (message(i, j, groups, messages)) messages++;
      i = j;
    }
    if (messages == 0) return;
    roomOrder(messages);
    finish(rooms.get(r), messages);
  }

  /** The acks known by platform message id, combined per id into {@code g*} (sorted by id); their number. */
  private int pmidGroups(int np) {
    Sorting.sort(pmidRows, np, ids, byPmid);
    int groups = 0;
    for (int i = 0; i < np; ) {
      int row = pmidRows[i];
      int f = 0;
      long a = NULL, b = NULL, c = NULL;
      int j = i;
      while (j < np && comparePmid(row, pmidRows[j]) == 0) {
        int x = pmidRows[j];
        f |= flags[x];
        a = min(a, t1[x]); b = min(b, t2[x]); c = min(c, t3[x]);
        j++;
      }
      gRow[groups] = row; gFlags[groups] = f; g1[groups] = a; g2[groups] = b; g3[groups] = c;
      groups++;
      i = j;
    }
    return groups;
  }

  /** The group of the platform message id of {@code row}, or -1. */
  private int pmidGroup(int row, int groups) {
    int lo = 0, hi = groups - 1;
    while (lo <= hi) {
      int mid = (lo + hi) >>> 1;
      int c = comparePmid(gRow[mid], row);
      if (c < 0) lo = mid + 1;
      else if (c > 0) hi = mid - 1;
      else return mid;
    }
    return -1;
  }

  private static long min(long a, long b) {
    if (a == NULL) return b;
    if (b == NULL) return a;
    return Math.min(a, b);
  }

  private static int min(int a, int b) {
    if (a == NULL_INT) return b;
    if (b == NULL_INT) return a;
    return Math.min(a, b);
  }

  /** Aggregates the rows {@code msgRows[from, to)} of one message into message {@code at}; false when the
   * message is not reported (no event, or its first event outside the range). */
  private boolean message(int from, int to, int groups, int at) {
    int fl = 0, modeMin = NULL_INT, partMin = NULL_INT, dispatched = 0, terminalSends = 0, retries = 0;
    long off = NULL, first = NULL, createdMin = NULL, dispatchedMs = NULL, terminalSent = NULL, terminalMs = NULL,
        answered = NULL, delivered = NULL, sentTs = NULL, firstAck = NULL;
    for (int i = from; i < to; i++) {
      int row = msgRows[i];
      int f = flags[row];
      fl |= f;
      modeMin = min(modeMin, mode[row]);
      partMin = min(partMin, part[row]);
      off = min(off, offset[row]);
      createdMin = min(createdMin, created[row]);
      if ((f & m.ackRow) != 0) {
        delivered = min(delivered, t1[row]);
        sentTs = min(sentTs, t2[row]);
        firstAck = min(firstAck, t3[row]);
        continue;
      }
      if (pmidLen[row] >= 0 && groups > 0) {
        int g = pmidGroup(row, groups);
        if (g >= 0) {
          fl |= gFlags[g];
          delivered = min(delivered, g1[g]);
          sentTs = min(sentTs, g2[g]);
          firstAck = min(firstAck, g3[g]);
        }
      }
      first = min(first, t1[row]);
      answered = min(answered, t3[row]);
      if ((f & m.dispatched) != 0) {
        dispatched++;
        dispatchedMs = min(dispatchedMs, t2[row]);
      }
      if ((f & m.terminal) != 0) {
        terminalSent = min(terminalSent, t2[row]);
        terminalMs = min(terminalMs, t1[row]);
        if (t2[row] != NULL) terminalSends++;
      }
      if ((f & m.retried) != 0) retries++;
    }
    if (first == NULL || first < p.fromMs || first >= p.toMs) return false;
    Messages x = msgs;
    x.row[at] = msgRows[from];
    x.part[at] = partMin;
    x.offset[at] = off;
    x.first[at] = first;
    x.created[at] = createdMin;
    x.mode[at] = modeMin;
    x.flags[at] = fl;
    x.retries[at] = retries;
    x.dispatches[at] = dispatched > 0 ? dispatched : terminalSends;
    x.dispatchMs[at] = dispatchedMs != NULL ? dispatchedMs : terminalSent;
    x.terminalMs[at] = terminalMs;
    x.delivered[at] = delivered;
    x.device[at] = delivered != NULL ? delivered : sentTs;
    x.firstAck[at] = firstAck != NULL ? firstAck : answered;
    return true;
  }

  /** Orders the room's messages as its partition and offset do (then message id; nulls first) into {@code order}. */
  private void roomOrder(int messages) {
    if (order.length < messages) order = new int[messages * 2];
    for (int i = 0; i < messages; i++) order[i] = i;
    Messages x = msgs;
    Sorting.sort(order, messages, ids, (a, b) -> {
      int c = compareNullable(x.part[a], x.part[b]);
      if (c != 0) return c;
      c = compareNullable(x.offset[a], x.offset[b]);
      if (c != 0) return c;
      int ra = x.row[a], rb = x.row[b];
      return compareBytes(msgAt[ra], msgLen[ra], msgAt[rb], msgLen[rb]);
    });
  }

  private static int compareNullable(int a, int b) {
    return a == b ? 0 : a == NULL_INT ? -1 : b == NULL_INT ? 1 : Integer.compare(a, b);
  }

  private static int compareNullable(long a, long b) {
    return a == b ? 0 : a == NULL ? -1 : b == NULL ? 1 : Long.compare(a, b);
  }

  /** The room-order comparisons, each message's outcomes, and what the tables count of them. */
  private void finish(UTF8String roomId, int messages) {
    Messages x = msgs;
    long prevDevice = NULL, prevEnd = NULL;
    List<RoomRow> perRoom = new ArrayList<>(1);
    for (int k = 0; k < messages; k++) {
      int i = order[k];
      long device = x.device[i], dispatchMs = x.dispatchMs[i];
      int inverted = device == NULL || prevDevice == NULL ? -1 : device < prevDevice ? 1 : 0;
      int violation = dispatchMs == NULL || prevEnd == NULL ? -1 : dispatchMs < prevEnd ? 1 : 0;
      if (device != NULL) prevDevice = device;
      if (x.dispatches[i] > 0 && x.terminalMs[i] != NULL) prevEnd = x.terminalMs[i];
      int f = x.flags[i];
      int dispatches = x.dispatches[i];
      boolean[] yes = {
          dispatches > 0,
          x.delivered[i] != NULL || (f & m.read) != 0,
          (f & m.acked) != 0,
          (f & m.ackTimeout) != 0,
          (f & m.lateAck) != 0,
          (f & m.deadLettered) != 0,
          (f & m.skippedDuplicate) != 0,
          (f & m.sent) != 0,
          dispatches > 1,
          (f & m.failed) != 0,
          device == NULL,
          inverted >= 0,
          inverted == 1,
          violation >= 0,
          violation == 1,
      };
      int outcome = 0; // the message's outcomes as bits, in the order of facts.py's OUTCOMES
      for (int b = 0; b < yes.length; b++) if (yes[b]) outcome |= 1 << b;
      long first = x.first[i];
      int date = (int) Math.floorDiv(first, DAY_MS);
      int plat = platform[x.row[i]];
      int modeKey = modeKey(x.mode[i]);
      long firstAck = x.firstAck[i];
      long ackLatency = firstAck == NULL || dispatchMs == NULL ? NULL : firstAck - dispatchMs;
      long e2eLatency = firstAck == NULL || x.created[i] == NULL ? NULL : firstAck - x.created[i];

      RoomRow row = null;
      for (RoomRow candidate : perRoom) {
        if (candidate.date == date && candidate.platform == plat && candidate.mode == modeKey) row = candidate;
      }
      if (row == null) perRoom.add(row = new RoomRow(date, plat, modeKey, p.outcomes));
      row.add(outcome, x.retries[i], e2eLatency);

      long bucket = (long) Math.floor((double) first / (double) p.bucketMs) * p.bucketMs;
      int cell = cells.index(group(date, plat, modeKey, -1), bucket);
      if (cell == cellCounts.size()) cellCounts.add(new long[p.outcomes + 2]);
      count(cellCounts.get(cell), outcome, x.retries[i]);
      if (ackLatency != NULL) countLatency(group(date, plat, modeKey, 0), ackLatency);
      if (e2eLatency != NULL) countLatency(group(date, plat, modeKey, 1), e2eLatency);
    }
    for (RoomRow row : perRoom) out.add(row.row(roomId));
  }

  /** Adds a message to {@code counts}: messages, each of its outcomes, its retries. */
  private static void count(long[] counts, int outcome, long retries) {
    counts[0]++;
    for (int b = 1; b < counts.length - 1; b++) counts[b] += (outcome >>> (b - 1)) & 1;
    counts[counts.length - 1] += retries;
  }

  private void countLatency(long group, long value) {
    int k = latencies.index(group, value);
    if (k == latencyCounts.length) latencyCounts = Arrays.copyOf(latencyCounts, k * 2);
    latencyCounts[k]++;
  }

  /** The mode's position in {@code p.modes} from 1, or 0 for a null or unknown mode (both read as a null mode). */
  private int modeKey(int position) {
    return position == NULL_INT || position < 1 || position > p.modes.length ? 0 : position;
  }

  private UTF8String modeName(int key) {
    return key == 0 ? null : UTF8String.fromString(p.modes[key - 1]);
  }

  private UTF8String platformName(int code) {
    return code < 0 ? null : platforms.get(code);
  }

  /** A cell's or a latency value's row: {@code counts} are messages, the outcomes' counts and retries. */
  private InternalRow countRow(int kind, long group, long key, long[] counts, long[] values) {
    int platformCode = (int) ((group >>> 16) & 0xffff);
    return row(kind, (int) (group >> 32), null, platformCode == 0xffff ? -1 : platformCode,
        (int) ((group >>> 8) & 0xff), key, counts, values, null);
  }

  /** A row of the output ({@link RoomPass#schema}). */
  private InternalRow row(int kind, int date, UTF8String roomId, int platformCode, int mode, Long key, long[] counts,
      long[] values, Double percentile) {
    return new GenericInternalRow(new Object[] {kind, date, roomId, platformName(platformCode), modeName(mode), key,
        UnsafeArrayData.fromPrimitiveArray(counts), values == null ? null : UnsafeArrayData.fromPrimitiveArray(values),
        percentile});
  }

  /** One row of the rooms table, as its messages are added. */
  private final class RoomRow {
    final int date, platform, mode;
    final long[] counts; // messages, the outcomes' counts, retries
    long[] e2e = new long[16]; // the end-to-end latencies of its messages that have one
    int latencies;

    RoomRow(int date, int platform, int mode, int outcomes) {
      this.date = date; this.platform = platform; this.mode = mode;
      this.counts = new long[outcomes + 2];
    }

    void add(int outcome, long retries, long e2eLatency) {
      count(counts, outcome, retries);
      if (e2eLatency != NULL) {
        if (latencies == e2e.length) e2e = Arrays.copyOf(e2e, e2e.length * 2);
        e2e[latencies++] = e2eLatency;
      }
    }

    InternalRow row(UTF8String roomId) {
      return Partition.this.row(RoomPass.ROOM, date, roomId, platform, mode, null, counts, null,
          percentile(e2e, latencies));
    }
  }

  /** The percentile at {@code p.level} of {@code values[0, count)}, as Spark's {@code percentile} takes it (linear
   * interpolation, in the same double arithmetic); null for none. Sorts that part of {@code values}. */
  private Double percentile(long[] values, int count) {
    long[] e2e = values;
    if (count == 0) return null;
    Arrays.sort(e2e, 0, count);
    double position = (count - 1) * p.level;
    double lower = Math.floor(position), higher = Math.ceil(position);
    if (lower == higher) return (double) values[(int) lower];
    return (higher - position) * (double) values[(int) lower] + (position - lower) * (double) values[(int) higher];
  }

  /** A room's messages, one array per value (reused from room to room). */
  static final class Messages {
    int[] row, part, mode, flags, dispatches;
    long[] offset, first, created, retries, dispatchMs, terminalMs, delivered, device, firstAck;

    Messages(int size) {
      allocate(size);
    }

    void ensure(int size) {
      if (row.length < size) allocate(size * 2);
    }

    private void allocate(int size) {
      row = new int[size]; part = new int[size]; mode = new int[size]; flags = new int[size];
      dispatches = new int[size]; offset = new long[size]; first = new long[size]; created = new long[size];
      retries = new long[size]; dispatchMs = new long[size]; terminalMs = new long[size];
      delivered = new long[size]; device = new long[size]; firstAck = new long[size];
    }
  }
}
