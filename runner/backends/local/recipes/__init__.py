"""One recipe per server family the local backend runs: a new family is one new module
here and one entry in :data:`RECIPES`."""
from __future__ import annotations

from .base import FTP_USER, Launch, Recipe
from .http import GoHttpRecipe, NginxRecipe, NodeHttpRecipe
from .netty import NettyRecipe
from .proftpd import ProftpdRecipe
from .pureftpd import PureftpdRecipe
from .pyftpdlib import PyftpdlibRecipe
from .tpd import TpdRecipe
from .twisted import TwistedRecipe
from .uvicorn import UvicornRecipe
from .vsftpd import VsftpdRecipe

#: The recipes, in the order ``xferlab servers`` lists them.
RECIPES: tuple[type[Recipe], ...] = (PyftpdlibRecipe, TwistedRecipe, VsftpdRecipe, ProftpdRecipe,
                                     PureftpdRecipe, TpdRecipe, GoHttpRecipe, NginxRecipe, NodeHttpRecipe,
                                     UvicornRecipe, NettyRecipe)

__all__ = ["FTP_USER", "RECIPES", "Launch", "Recipe"]
