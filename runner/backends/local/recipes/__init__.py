"""One recipe per server family the local backend runs: a new family is one new module
here and one entry in :data:`RECIPES`."""
from __future__ import annotations

from runner.backends.local.recipes.base import FTP_USER, Launch, Recipe
from runner.backends.local.recipes.http import GoHttpRecipe, NginxRecipe, NodeHttpRecipe
from runner.backends.local.recipes.netty import NettyRecipe
from runner.backends.local.recipes.proftpd import ProftpdRecipe
from runner.backends.local.recipes.pureftpd import PureftpdRecipe
from runner.backends.local.recipes.pyftpdlib import PyftpdlibRecipe
from runner.backends.local.recipes.tpd import TpdRecipe
from runner.backends.local.recipes.twisted import TwistedRecipe
from runner.backends.local.recipes.uvicorn import UvicornRecipe
from runner.backends.local.recipes.vsftpd import VsftpdRecipe

#: The recipes, in the order ``xferlab servers`` lists them.
RECIPES: tuple[type[Recipe], ...] = (PyftpdlibRecipe, TwistedRecipe, VsftpdRecipe, ProftpdRecipe,
                                     PureftpdRecipe, TpdRecipe, GoHttpRecipe, NginxRecipe, NodeHttpRecipe,
                                     UvicornRecipe, NettyRecipe)

__all__ = ["FTP_USER", "RECIPES", "Launch", "Recipe"]
