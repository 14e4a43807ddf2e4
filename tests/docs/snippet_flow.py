"""The names a docs page's python reads before they are bound, in the order it runs.

`test_snippet_names.py` reads a page's python blocks as one script. Read as a flat set
of names (a name bound anywhere counts as bound everywhere), a name read in a loop's
body before the line that binds it, or by a function called before the name is bound,
passed: serve-while-training.md's first sketch read ``u`` in its loop before the loop's
``u = solve(...)`` bound it, a NameError at its first step. `Script` walks the
statements in the order they run instead:

- at module level (and in a class body, which runs where it stands) a name must be
  bound by a statement before the one that reads it. A loop's body is read once, in
  order (its first pass); a branch (``if``/``else``, ``try``/``except``, ``match``)
  sees what was bound before it, and after it every name any branch binds counts as
  bound (so a name bound in one branch only is not taken for a mistake);
- a function's body runs when it is called: a local name read before its binding
  there is unbound (as Python's UnboundLocalError); the other names it reads (its free
  names, with those of the page's functions it calls) must be bound where a statement
  calls it by name, ``f(...)``, and in any case somewhere in the script by its end (a
  function passed on, a method, a lambda: called later, by someone else).

It sees no names through ``from x import *`` (which the docs do not use) and takes
``del`` for a read only. Decorators, defaults and annotations are read where the
``def`` stands, as Python evaluates them without ``from __future__ import annotations``.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterable
from dataclasses import dataclass, field

BUILTINS = frozenset(dir(builtins))
#: nodes whose bodies run later, or in a scope of their own
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


@dataclass
class Function:
    """A function's body as its callers see it: the names it reads from the script
    (`free`) and the script's functions it calls by name (`calls`, their free names
    read too when it runs)."""

    free: set[str] = field(default_factory=set)
    calls: set[str] = field(default_factory=set)


def _target_names(target: ast.AST) -> Iterable[str]:
    """The names an assignment target binds (``a``, ``a, (b, *c)``; not ``a.x``)."""
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, (ast.Tuple, ast.List)):
        for elt in target.elts:
            yield from _target_names(elt)
    elif isinstance(target, ast.Starred):
        yield from _target_names(target.value)


def _locals(body: list[ast.stmt]) -> set[str]:
    """The names a function body binds (its locals), not looking into nested scopes;
    less those it declares ``global`` or ``nonlocal``."""
    bound: set[str] = set()
    declared: set[str] = set()
    todo: list[ast.AST] = list(body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            declared |= set(node.names)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bound.add(node.rest)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        if isinstance(node, _DEFS):
            continue  # (its body is a scope of its own)
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue  # (its targets are its own; a walrus in it is rare enough)
        todo.extend(ast.iter_child_nodes(node))
    return bound - declared


class Script:
    """One scope's statements walked in the order they run (see the module's docstring).

    `missing` gathers the names read before any binding of them on the way there;
    `functions` is the script's table of its functions by name (shared with the
    scopes inside it); `later` the free names of the functions defined in it, checked
    against what the script binds by its end (`finish`)."""

    def __init__(
        self,
        seen: set[str] | None = None,
        local: set[str] | None = None,
        functions: dict[str, Function] | None = None,
    ) -> None:
        self.seen: set[str] = set(seen or ())
        #: a function body's locals (its other names are read from the script); None
        #: at the script's level, whose every name is its own
        self.local = local
        self.functions: dict[str, Function] = {} if functions is None else functions
        self.missing: set[str] = set()
        self.own = Function()  # (a function body's: what its callers read through it)
        self.later: list[Function] = []
        self.in_class = 0  # (a method is no function of the script's, called by name)

    # -- reads -----------------------------------------------------------------------
    def read(self, name: str, seen: set[str]) -> None:
        if name in seen or name in BUILTINS:
            return
        if self.local is None or name in self.local:
            self.missing.add(name)  # (in a function: an unbound local)
        else:
            self.own.free.add(name)

    def reads_of(self, name: str) -> set[str]:
        """The free names function `name` reads when called, its callees' included."""
        out: set[str] = set()
        todo, done = [name], set()
        while todo:
            each = todo.pop()
            if each in done or each not in self.functions:
                continue
            done.add(each)
            out |= self.functions[each].free
            todo.extend(self.functions[each].calls)
        return out

    def expr(self, node: ast.AST | None, seen: set[str]) -> None:
        """Read the names of expression `node`, as it runs now with `seen` bound."""
        if node is None:
            return
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                self.read(node.id, seen)
            return
        if isinstance(node, ast.NamedExpr):
            self.expr(node.value, seen)
            seen.update(_target_names(node.target))
            return
        if isinstance(node, ast.Lambda):
            for default in [*node.args.defaults, *node.args.kw_defaults]:
                self.expr(default, seen)
            params = {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
            self.deferred([ast.Return(node.body)], params)
            return
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            inner = set(seen)
            for gen in node.generators:
                self.expr(gen.iter, inner)
                inner.update(_target_names(gen.target))
                for cond in gen.ifs:
                    self.expr(cond, inner)
            for part in ("elt", "key", "value"):
                self.expr(getattr(node, part, None), inner)
            return
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if self.local is None:
                for name in sorted(self.reads_of(node.func.id)):
                    self.read(name, seen)
            else:
                self.own.calls.add(node.func.id)
        for child in ast.iter_child_nodes(node):
            self.expr(child, seen)

    def bind(self, target: ast.AST, seen: set[str]) -> None:
        """Bind assignment target `target` (reading the names ``a.x`` or ``a[i]`` read)."""
        if isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self.bind(elt, seen)
        elif isinstance(target, ast.Starred):
            self.bind(target.value, seen)
        elif isinstance(target, ast.Name):
            seen.add(target.id)
        else:
            self.expr(target, seen)

    # -- deferred bodies ---------------------------------------------------------------
    def deferred(self, body: list[ast.stmt], params: set[str]) -> Function:
        """The `Function` of a body that runs later (a function's, a lambda's): its
        unbound locals are missing here; its free names are read by its callers."""
        inner = Script(params, _locals(body) | params, self.functions)
        inner.stmts(body, inner.seen)
        self.missing |= inner.missing
        if self.local is None:
            self.later.append(inner.own)
        else:  # (a closure: what it reads of this scope's locals, this scope has)
            self.own.free |= inner.own.free - self.local
            self.own.calls |= inner.own.calls
        return inner.own

    def define(self, node: ast.FunctionDef | ast.AsyncFunctionDef, seen: set[str]) -> None:
        args = node.args
        for each in [*node.decorator_list, *args.defaults, *args.kw_defaults, node.returns]:
            self.expr(each, seen)
        params = set()
        for arg in ast.walk(args):
            if isinstance(arg, ast.arg):
                params.add(arg.arg)
                self.expr(arg.annotation, seen)
        function = self.deferred(node.body, params)
        if self.local is None and not self.in_class:
            self.functions[node.name] = function
        seen.add(node.name)

    # -- statements ----------------------------------------------------------------
    def stmts(self, body: list[ast.stmt], seen: set[str]) -> set[str]:
        """Walk `body` in order from `seen` (updated in place, and returned)."""
        for node in body:
            self.stmt(node, seen)
        return seen

    def branches(self, seen: set[str], *bodies: list[ast.stmt]) -> None:
        """Each body from what `seen` holds now; after them, what any of them bound."""
        start = set(seen)
        for body in bodies:
            seen |= self.stmts(body, set(start))

    def stmt(self, node: ast.stmt, seen: set[str]) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.define(node, seen)
        elif isinstance(node, ast.ClassDef):
            for each in [*node.decorator_list, *node.bases, *node.keywords]:
                self.expr(each, seen)
            self.in_class += 1  # (its body runs here; its names are its own, not seen after)
            self.stmts(node.body, set(seen))
            self.in_class -= 1
            seen.add(node.name)
        elif isinstance(node, ast.Assign):
            self.expr(node.value, seen)
            for target in node.targets:
                self.bind(target, seen)
        elif isinstance(node, ast.AugAssign):  # (``x += 1`` reads x, then binds it)
            if isinstance(node.target, ast.Name):
                self.read(node.target.id, seen)
            else:
                self.expr(node.target, seen)
            self.expr(node.value, seen)
            self.bind(node.target, seen)
        elif isinstance(node, ast.AnnAssign):
            self.expr(node.annotation, seen)
            self.expr(node.value, seen)
            if node.value is not None:
                self.bind(node.target, seen)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            seen |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"}
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            self.expr(node.iter, seen)
            start = set(seen)
            inside = set(start)
            self.bind(node.target, inside)
            seen |= self.stmts(node.body, inside)
            seen |= self.stmts(node.orelse, set(start))
        elif isinstance(node, (ast.While, ast.If)):  # (a loop's body: its first pass)
            self.expr(node.test, seen)
            self.branches(seen, node.body, node.orelse)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                self.expr(item.context_expr, seen)
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, seen)
            self.stmts(node.body, seen)
        elif isinstance(node, (ast.Try, ast.TryStar)):
            tried = self.stmts(node.body, set(seen))
            handled = []
            for handler in node.handlers:
                inside = set(tried)  # (where the body stopped is unknown: lenient)
                self.expr(handler.type, inside)
                inside |= {handler.name} if handler.name else set()
                handled.append(self.stmts(handler.body, inside))
            seen |= tried.union(*handled) | self.stmts(node.orelse, set(tried))
            self.stmts(node.finalbody, seen)
        elif isinstance(node, ast.Match):
            self.expr(node.subject, seen)
            start, after = set(seen), set()
            for case in node.cases:
                inside = set(start) | _locals([case.pattern])  # type: ignore[list-item]
                self.expr(case.guard, inside)
                after |= self.stmts(case.body, inside)
            seen |= after
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            pass
        else:  # (Expr, Return, Raise, Assert, Delete, Pass, ...: expressions read)
            self.expr(node, seen)

    def run(self, source: str) -> set[str]:
        """Walk `source` on from what the script has bound; the names it read unbound."""
        self.missing = set()
        self.stmts(ast.parse(source).body, self.seen)
        return self.missing

    def finish(self, functions: list[Function] | None = None) -> set[str]:
        """The names `functions` (default: every function defined in the script) read
        that the script binds nowhere, even by its end."""
        out: set[str] = set()
        for function in self.later if functions is None else functions:
            names = set(function.free)
            for callee in function.calls:
                names |= self.reads_of(callee)
            out |= names - self.seen - BUILTINS
        return out
