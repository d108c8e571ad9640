
@èPÈât
…@èPZj" Rdotted.name"
 Rarr[0]" ""RdZ Ra.bZRlistb bZ Rc]"Bx.y[z((RndHXºsb
in.tern[1]h