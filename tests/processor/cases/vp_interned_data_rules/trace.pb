
@èPÈât
&@ÐPZHPXb
catB	nameAh
@´PZ	HPXb	nameBh
@˜PZ
	HPXh
@üPZHPXbseq2name
@àPZHPX