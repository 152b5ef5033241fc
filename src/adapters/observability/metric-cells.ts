import type { Registry } from "prom-client";

/**
 * Counters, histograms and gauges for the per-request paths, as plain cells.
 *
 * prom-client checks and hashes a label set on every `inc` and `observe`
 * (decision 0023). Here the caller asks once for the cell of a label set
 * (`cell(labels)`), keeps it, and counts into it with a field update; the
 * registry reads every cell when scraped. The families register in a
 * prom-client Registry, which writes the exposition with the rest of the
 * metrics, in the same text format (histograms as cumulative `_bucket`s with
 * `le`, `_sum` and `_count`).
 */

type Labels<L extends string> = { readonly [K in L]: string };

/** One exposition sample, as prom-client's Registry reads a metric's values. */
interface Sample {
  readonly labels: Record<string, string | number>;
  readonly value: number;
  readonly metricName?: string;
}

interface FamilyOptions<L extends string> {
  readonly name: string;
  readonly help: string;
  readonly labelNames?: readonly L[];
  readonly registers: readonly Registry[];
}

/** A metric family: cells by label set, read by the registry at scrape time. */
abstract class Family<L extends string, C> {
  readonly name: string;
  readonly help: string;
  abstract readonly type: "counter" | "histogram" | "gauge";
  readonly aggregator = "sum";
  private readonly labelNames: readonly L[];
  private readonly cells = new Map<string, { readonly labels: Labels<L>; readonly cell: C }>();

  constructor(options: FamilyOptions<L>) {
    this.name = options.name;
    this.help = options.help;
    this.labelNames = options.labelNames ?? [];
    for (const registry of options.registers) registry.registerMetric(this as never);
  }

  protected abstract newCell(): C;
  protected abstract samples(labels: Labels<L>, cell: C): Sample[];

  /** The cell of one label set: made the first time it is asked for, the same cell after. Keep it; counting into it costs a field update. */
  cell(labels: Labels<L>): C {
    const key = this.labelNames.map((name) => labels[name]).join("\u0000");
    let entry = this.cells.get(key);
    if (!entry) {
      for (const name of this.labelNames) if (typeof labels[name] !== "string") throw new TypeError(`${this.name}: label ${name} is missing`);
      const copy = Object.fromEntries(this.labelNames.map((name) => [name, labels[name]])) as Labels<L>;
      this.cells.set(key, (entry = { labels: copy, cell: this.newCell() }));
    }
    return entry.cell;
  }

  /** What prom-client's Registry reads when scraped. */
  async get(): Promise<{ name: string; help: string; type: string; values: Sample[]; aggregator: string }> {
    const values: Sample[] = [];
    for (const { labels, cell } of this.cells.values()) values.push(...this.samples(labels, cell));
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  /** Forgets every cell's count (the registry's resetMetrics); cells handed out stay valid and count from zero. */
  reset(): void {
    for (const { cell } of this.cells.values()) this.zero(cell);
  }

  protected abstract zero(cell: C): void;
}

export class CounterCell {
  value = 0;
  inc(by = 1): void {
    this.value += by;
  }
}

/** A family whose cells hold one value each (counters, gauges). */
abstract class ValueFamily<L extends string, C extends { value: number }> extends Family<L, C> {
  protected samples(labels: Labels<L>, cell: C): Sample[] {
    return [{ labels, value: cell.value }];
  }
  protected zero(cell: C): void {
    cell.value = 0;
  }
}

export class CounterFamily<L extends string = never> extends ValueFamily<L, CounterCell> {
  readonly type = "counter";
  protected newCell(): CounterCell {
    return new CounterCell();
  }
}

export class GaugeCell {
  value = 0;
  inc(by = 1): void {
    this.value += by;
  }
  dec(by = 1): void {
    this.value -= by;
  }
  set(value: number): void {
    this.value = value;
  }
}

export class GaugeFamily<L extends string = never> extends ValueFamily<L, GaugeCell> {
  readonly type = "gauge";
  protected newCell(): GaugeCell {
    return new GaugeCell();
  }
}

export class HistogramCell {
  /** Observations per bucket, not cumulative (the last counts those above every bound: +Inf). */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(private readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(value: number): void {
    if (!Number.isFinite(value)) return;
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    this.counts[i]! += 1;
    this.sum += value;
    this.count += 1;
  }
}

export class HistogramFamily<L extends string = never> extends Family<L, HistogramCell> {
  readonly type = "histogram";
  private readonly bounds: readonly number[];

  constructor(options: FamilyOptions<L> & { readonly buckets: readonly number[] }) {
    super(options);
    this.bounds = [...options.buckets].sort((a, b) => a - b);
  }

  protected newCell(): HistogramCell {
    return new HistogramCell(this.bounds);
  }

  protected samples(labels: Labels<L>, cell: HistogramCell): Sample[] {
    const samples: Sample[] = [];
    let cumulative = 0;
    for (let i = 0; i < this.bounds.length; i++) {
      cumulative += cell.counts[i]!;
      samples.push({ metricName: `${this.name}_bucket`, labels: { le: this.bounds[i]!, ...labels }, value: cumulative });
    }
    samples.push({ metricName: `${this.name}_bucket`, labels: { le: "+Inf", ...labels }, value: cell.count });
    samples.push({ metricName: `${this.name}_sum`, labels, value: cell.sum });
    samples.push({ metricName: `${this.name}_count`, labels, value: cell.count });
    return samples;
  }

  protected zero(cell: HistogramCell): void {
    cell.counts.fill(0);
    cell.sum = 0;
    cell.count = 0;
  }
}
