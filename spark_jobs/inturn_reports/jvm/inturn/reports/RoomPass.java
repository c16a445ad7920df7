package inturn.reports;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The report's pass over each room partition: the message facts and what the report tables count of them, in one
 * go over the rows Spark shuffled by room ({@code transform/facts.py} builds those rows and describes what each
 * fact means; docs/reports.md says why this pass is code of its own).
 *
 * <p>Each task copies its partition's rows into columns, groups them by room, and for each room: combines the
 * acks known only by platform message id per id, aggregates each message's events and acks, orders the messages
 * as the room's partition and offset do, compares each with the one before it, and adds the message to the
 * room's row of the rooms table, to its cell of the counts and to the latency counts. It returns those rows
 * (the {@link #schema}): a room's rows are whole (a room is in one partition), the cells' and latencies' are
 * partial and are summed on the driver.
 */
public final class RoomPass {
  private RoomPass() {}

  /** A null long value in the copied columns. */
  static final long NULL = Long.MIN_VALUE;
  /** A null int value in the copied columns. */
  static final int NULL_INT = Integer.MIN_VALUE;

  /** The output row kinds. */
  public static final int ROOM = 0, CELL = 1, LATENCY = 2;

  /** The bit masks this pass reads, in the order {@code facts.py} passes them. */
  static final class Masks implements java.io.Serializable {
    private static final long serialVersionUID = 1L;
    final int ackRow, dispatched, terminal, retried, read, failed;
    final int acked, ackTimeout, lateAck, deadLettered, skippedDuplicate, sent;

    Masks(int[] m) {
      ackRow = m[0]; dispatched = m[1]; terminal = m[2]; retried = m[3]; read = m[4]; failed = m[5];
      acked = m[6]; ackTimeout = m[7]; lateAck = m[8]; deadLettered = m[9]; skippedDuplicate = m[10]; sent = m[11];
    }
  }

  /**
   * The columns of the output. Every row has its {@code kind}, {@code date}, {@code platform} and {@code mode}; a
   * room's row ({@code ROOM}) its {@code room_id}, {@code counts} (messages, each outcome's count in the order of
   * facts.py's OUTCOMES, retries) and {@code e2e_p95_ms}; a cell's ({@code CELL}) its bucket's start as {@code key}
   * and {@code counts} as a room's; a latency group's ({@code LATENCY}) its measure as {@code key}, its distinct
   * {@code values} and in {@code counts} how many messages had each.
   */
  public static StructType schema() {
    ArrayType longs = DataTypes.createArrayType(DataTypes.LongType, false);
    List<StructField> fields = new ArrayList<>();
    fields.add(DataTypes.createStructField("kind", DataTypes.IntegerType, false));
    fields.add(DataTypes.createStructField("date", DataTypes.DateType, false));
    fields.add(DataTypes.createStructField("room_id", DataTypes.StringType, true));
    fields.add(DataTypes.createStructField("platform", DataTypes.StringType, true));
    fields.add(DataTypes.createStructField("mode", DataTypes.StringType, true));
    fields.add(DataTypes.createStructField("key", DataTypes.LongType, true));
    fields.add(DataTypes.createStructField("counts", longs, false));
    fields.add(DataTypes.createStructField("values", longs, true));
    fields.add(DataTypes.createStructField("e2e_p95_ms", DataTypes.DoubleType, true));
    return DataTypes.createStructType(fields);
  }

  /**
   * The pass over {@code rows} (shuffled by room; columns named as {@code facts.py}'s narrow row), as a frame of
   * {@link #schema} rows.
   */
  public static Dataset<Row> run(Dataset<Row> rows, long fromMs, long toMs, long bucketMs, String[] modes,
      int outcomes, int[] masks, double level) {
    StructType in = rows.schema();
    int[] ordinals = new int[Columns.NAMES.length];
    for (int i = 0; i < ordinals.length; i++) ordinals[i] = in.fieldIndex(Columns.NAMES[i]);
    Params params = new Params(fromMs, toMs, bucketMs, modes, outcomes, new Masks(masks), level, ordinals);
    JavaRDD<InternalRow> input = rows.queryExecution().toRdd().toJavaRDD();
    JavaRDD<InternalRow> out = input.mapPartitions(it -> new Partition(params).run(it));
    SparkSession spark = rows.sparkSession();
    return spark.internalCreateDataFrame(out.rdd(), schema(), false);
  }

  /** What every task needs to know. */
  static final class Params implements java.io.Serializable {
    private static final long serialVersionUID = 1L;
    final long fromMs, toMs, bucketMs;
    final String[] modes;
    final int outcomes;
    final Masks masks;
    final double level;
    final int[] ordinals;

    Params(long fromMs, long toMs, long bucketMs, String[] modes, int outcomes, Masks masks, double level,
        int[] ordinals) {
      this.fromMs = fromMs; this.toMs = toMs; this.bucketMs = bucketMs; this.modes = modes;
      this.outcomes = outcomes; this.masks = masks; this.level = level; this.ordinals = ordinals;
    }
  }

  /** The input columns read, by name, in the order of {@link Params#ordinals}. */
  static final class Columns {
    static final String[] NAMES = {"room_id", "message_id", "platform", "_flags", "_mode", "partition", "offset",
        "created_at_ms", "_t1", "_t2", "_t3", "_pmid"};
    static final int ROOM_ID = 0, MESSAGE_ID = 1, PLATFORM = 2, FLAGS = 3, MODE = 4, PARTITION = 5, OFFSET = 6,
        CREATED = 7, T1 = 8, T2 = 9, T3 = 10, PMID = 11;
  }
}
