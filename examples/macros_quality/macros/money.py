from streambuild.compiler.macros.models import MacroContext


def cents(column: str, scale: int = 100) -> str:
    """Money as whole cents, rounded."""
    return f"toInt64(round({column} * {scale}))"


def reporting_currency(ctx: MacroContext) -> str:
    """The project's reporting currency, as a SQL string literal."""
    return "'" + ctx.variables["currency"] + "'"
