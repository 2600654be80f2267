from governance.lib.doors import AuditedCommand
from governance.usage import partitions


class Command(AuditedCommand):
    help = "Sample partitions (PostgreSQL): create the current month's (or day's) and the next, apply retention."

    def add_arguments(self, parser):
        parser.add_argument("--ensure", action="store_true", help="create missing partitions (idempotent)")
        parser.add_argument("--ahead", type=int, default=None, help="spans ahead (default SAMPLE_PARTITIONS_AHEAD)")
        parser.add_argument("--drop-expired", action="store_true", help="drop partitions older than retention")
        parser.add_argument("--list", action="store_true", help="print the partitions")

    def handle(self, *args, ensure: bool, ahead: int | None, drop_expired: bool, list: bool, **options):
        if not partitions.is_partitioned():
            self.stdout.write("usage_sample is not partitioned on this database (SQLite keeps a plain table)")
        if ensure:
            report = partitions.partitions_ensure(ahead=ahead)
            self.stdout.write(f"created {report.created}; moved {report.moved_rows} rows out of DEFAULT")
        if drop_expired:
            report = partitions.partitions_drop_expired()
            self.stdout.write(f"dropped {report.dropped}; deleted {report.deleted_rows} rows")
        if list and partitions.is_partitioned():
            for span in partitions.partitions_list():
                self.stdout.write(f"{span.name}  {span}")
